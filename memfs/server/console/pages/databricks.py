"""A Databricks store's pages (``/console/databricks/{id}``): its actors, an actor's sessions, a
listing of entries, an entry, its edit and delete pages, a new entry, search.

Actor and session ids are agent-written and may hold any character, so they travel in the
query string (``?actor=…&session=…``, ``session_less=1`` for an actor's entries without a
session), never in the path; entry ids are the storage's (``[A-Za-z0-9_.-]``). Everything of
an entry reaches the browser as escaped text.

Writes follow the mount's rule for a Databricks edit: the edit page carries the SHA-256 of the
content it loaded (a hidden ``precondition``; an entry without content: that of ``""``), and
the write passes it as ``expected_sha256``, compared by the storage inside the write's
transaction. If the content changed meanwhile nothing is written: the page shows theirs against
yours as a diff (``diff.diff_table``) with "Save over theirs" (the precondition is now the
version shown) and "Keep theirs". The patch holds only the fields the person changed (the
description's loaded SHA-256 is a hidden field too), so a description edit never writes back
content it did not touch, and the reverse; a description typed over someone else's new one is
a conflict as well (``expected_description_sha256``, in the same transaction). On a conflict,
a field the person did not change shows theirs, so "Save over theirs" writes only what was
typed. A delete carries the precondition as well.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memfs.contract.errors import ApiError, BadRequestError, NotFoundError, PreconditionFailedError
from memfs.contract.models import sha256_hex
from memfs.contract.search_words import best_line
from memfs.server.console.context import Console
from memfs.server.console.diff import diff_table
from memfs.server.console.live import Watch, databricks_target
from memfs.server.console.pages.store import textarea
from memfs.server.console.security import CONSOLE_PATH
from memfs.server.console.sessions import SignedIn
from memfs.server.databricks import validation as check
from memfs.server.databricks.storage import (
    DbxEntry,
    DbxStore,
    EntryFilter,
    EntryPatch,
    EntryPosition,
    NewEntry,
    SearchRequest,
)
from memfs.server.http import cursor
from memfs.server.http.query import bad_cursor, page_position
from memfs.server.memory_stores import validation
from memfs.server.search import validate_query

log = logging.getLogger(__name__)

LISTED = 500  # actors, sessions or entries on one page (then a "Next page" link)
SEARCH_LIMIT = 50
CONFLICT = "Someone changed this entry since you opened it: nothing was saved."
CHANGED = "This entry changed since you opened this page, so nothing was deleted. Look again."
GONE = "This entry was deleted since you opened this page; nothing was saved."


def dbx_url(store_id: str) -> str:
    return f"{CONSOLE_PATH}/databricks/{store_id}"


def entry_url(store_id: str, entry_id: str) -> str:
    return f"{dbx_url(store_id)}/entries/{entry_id}"


def entries_url(store_id: str, actor_id: str, session_id: str | None, session_less: bool) -> str:
    query = {"actor": actor_id}
    if session_id is not None:
        query["session"] = session_id
    elif session_less:
        query["session_less"] = "1"
    return f"{dbx_url(store_id)}/entries?{urlencode(query)}"


def actor_url(store_id: str, actor_id: str) -> str:
    return f"{dbx_url(store_id)}/actor?{urlencode({'actor': actor_id})}"


# The kinds of the listings' page cursors (``memfs.server.http.cursor``: opaque, checked, each
# tied to its listing and filters; ``?page=`` in the URL, read as the API reads its own:
# ``page_position``)
_ACTORS, _SESSIONS, _ENTRIES = "console-actors", "console-sessions", "console-entries"


def position_text(position: dict[str, Any], key: str) -> str:
    value = position.get(key)
    if not isinstance(value, str):
        raise bad_cursor()
    return value


def next_page_url(url: str, kind: str, query: str, position: dict[str, Any]) -> str:
    """``url`` (a listing's first page) continuing after ``position``."""
    token = cursor.encode(kind, query, position)
    return f"{url}{'&' if '?' in url else '?'}{urlencode({'page': token})}"


def content_sha(entry: DbxEntry) -> str:
    """The precondition of an entry's content: the storage compares ``content or ""``."""
    return sha256_hex(entry.content or "")


# a title says what the page is for, as its h1 does (an entry, or its edit or delete form)
ENTRY_TITLES = {"dbx_entry.html": "{}", "dbx_edit.html": "Edit {}", "dbx_delete.html": "Delete {}?"}


class DatabricksPages:
    """A Databricks store's pages: actors, sessions, entries (module doc)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.storage = self.console.storage
        self.dbx = self.storage.databricks

    def render(
        self,
        request: Request,
        template: str,
        signed_in: SignedIn,
        store: DbxStore,
        *,
        status: int = 200,
        error: str | None = None,
        **context: Any,
    ) -> Response:
        return self.console.renderer.page(
            request,
            template,
            signed_in=signed_in,
            status=status,
            error=error,
            store=store,
            store_url=dbx_url(store.id),
            actor_url=actor_url,
            entries_url=entries_url,
            entry_url=entry_url,
            entry_sha=content_sha,
            **context,
        )

    async def load_store(self, request: Request) -> tuple[SignedIn, DbxStore]:
        signed_in = await self.console.signed_in(request)
        return signed_in, await self.dbx.get_store(request.path_params["store_id"])

    def actor_param(self, request: Request) -> str:
        return check.actor_id(request.query_params.get("actor"))

    async def store_page(self, request: Request) -> Response:
        signed_in, store = await self.load_store(request)
        query, first_url = cursor.query_digest(store.id), dbx_url(store.id)
        position = page_position(request, _ACTORS, query)
        after = None if position is None else position_text(position, "a")
        actors = await self.console.console_storage.dbx_actors(
            store.id, limit=LISTED + 1, after=after
        )
        shown = actors[:LISTED]
        next_url = (
            next_page_url(first_url, _ACTORS, query, {"a": shown[-1].key})
            if len(actors) > LISTED
            else None
        )
        return self.render(
            request, "dbx_store.html", signed_in, store, title=store.id, actors=shown,
            next_url=next_url, first_url=first_url if position is not None else None,
            live=await databricks_target(self.console, store.id, Watch(), "reload"),
        )  # fmt: skip

    async def actor_page(self, request: Request) -> Response:
        signed_in, store = await self.load_store(request)
        actor = self.actor_param(request)
        query, first_url = cursor.query_digest(store.id, actor), actor_url(store.id, actor)
        position = page_position(request, _SESSIONS, query)
        after = None if position is None else position_text(position, "s")
        sessions = await self.console.console_storage.dbx_sessions(
            store.id, actor, limit=LISTED + 1, after=after
        )
        shown = sessions[:LISTED]
        next_url = (  # no session is stored as "", which sorts first
            next_page_url(first_url, _SESSIONS, query, {"s": shown[-1].key or ""})
            if len(sessions) > LISTED
            else None
        )
        return self.render(
            request, "dbx_actor.html", signed_in, store, title=f"Actor {actor}",
            actor=actor, sessions=shown, next_url=next_url,
            first_url=first_url if position is not None else None,
            live=await databricks_target(self.console, store.id, Watch(actor_id=actor), "reload"),
        )  # fmt: skip

    async def entries_page(self, request: Request) -> Response:
        signed_in, store = await self.load_store(request)
        actor = self.actor_param(request)
        session = check.session_id(request.query_params.get("session"))
        session_less = session is None and request.query_params.get("session_less") == "1"
        # no session is stored as "" (databricks.storage): that filter lists exactly those
        flt = EntryFilter(actor, session_id="" if session_less else session)
        query = cursor.query_digest(store.id, actor, flt.session_id)
        first_url = entries_url(store.id, actor, session, session_less)
        position = page_position(request, _ENTRIES, query)
        after = None
        if position is not None:
            after = EntryPosition(*(position_text(position, key) for key in ("p", "s", "i")))
        page = await self.dbx.list_entries(
            store.id, flt, after=after, limit=LISTED, with_content=False
        )
        next_url = None
        if page.next is not None:
            at = {"p": page.next.path, "s": page.next.session_id, "i": page.next.entry_id}
            next_url = next_page_url(first_url, _ENTRIES, query, at)
        watch = Watch(actor_id=actor, session_id=session, session_less=session_less)
        return self.render(
            request, "dbx_entries.html", signed_in, store, title=f"Entries of {actor}",
            actor=actor, session=session, session_less=session_less, entries=page.items,
            next_url=next_url, first_url=first_url if position is not None else None,
            live=await databricks_target(self.console, store.id, watch, "reload"),
        )  # fmt: skip

    async def load_entry(self, request: Request) -> tuple[SignedIn, DbxStore, DbxEntry]:
        signed_in, store = await self.load_store(request)
        entry = await self.dbx.get_entry(
            store.id, request.path_params["entry_id"], with_content=True
        )
        return signed_in, store, entry

    async def entry_render(
        self,
        request: Request,
        template: str,
        signed_in: SignedIn,
        store: DbxStore,
        entry: DbxEntry,
        **context: Any,
    ) -> Response:
        live = await databricks_target(self.console, store.id, Watch(item_id=entry.id), "notice")
        return self.render(
            request, template, signed_in, store, title=ENTRY_TITLES[template].format(entry.path),
            entry=entry,
            this_url=entry_url(store.id, entry.id), live=live, **context,
        )  # fmt: skip

    async def entry_page(self, request: Request) -> Response:
        signed_in, store, entry = await self.load_entry(request)
        return await self.entry_render(request, "dbx_entry.html", signed_in, store, entry)

    async def edit_form(self, request: Request) -> Response:
        signed_in, store, entry = await self.load_entry(request)
        return await self.entry_render(
            request, "dbx_edit.html", signed_in, store, entry,
            content=entry.content or "", description=entry.description or "",
            precondition=content_sha(entry),
            description_sha=sha256_hex(entry.description or ""), diff=None,
        )  # fmt: skip

    async def save(self, request: Request) -> Response:
        signed_in, store = await self.load_store(request)
        entry_id = request.path_params["entry_id"]
        form = await self.console.post_form(request, signed_in)
        content = textarea(form.get("content", ""))
        description = textarea(form.get("description", ""))
        precondition = form.get("precondition", "")
        description_sha = form.get("description_sha", "")
        fields: dict[str, str | None] = {}
        try:
            expected = validation.sha256_field(precondition, "precondition")
            if sha256_hex(content) != expected:
                fields["content"] = check.content(content)
            if sha256_hex(description) != description_sha:
                fields["description"] = check.description(description)
            expected_description = None
            if "description" in fields:  # a description typed over someone else's is a conflict
                expected_description = validation.sha256_field(description_sha, "description_sha")
            if fields:
                await self.dbx.update_entry(
                    store.id,
                    entry_id,
                    EntryPatch(fields),
                    expected_sha256=expected,
                    expected_description_sha256=expected_description,
                )
        except PreconditionFailedError:
            try:
                theirs = await self.dbx.get_entry(store.id, entry_id, with_content=True)
            except NotFoundError:
                return self.gone(request, signed_in, store, content, description)
            their_description = theirs.description or ""
            # a field the person did not change takes theirs, so that "Save over theirs" writes
            # only what they typed (never an old copy over someone else's change)
            if "content" not in fields:
                content = theirs.content or ""
            if "description" not in fields:
                description = their_description
            diff = diff_table(theirs.content or "", content).unified
            return await self.entry_render(
                request, "dbx_edit.html", signed_in, store, theirs, status=409, error=CONFLICT,
                content=content, description=description, precondition=content_sha(theirs),
                description_sha=sha256_hex(their_description), diff=diff,
                their_description=their_description,
            )  # fmt: skip
        except NotFoundError:
            return self.gone(request, signed_in, store, content, description)
        except ApiError as exc:
            current = await self.dbx.get_entry(store.id, entry_id, with_content=True)
            return await self.entry_render(
                request, "dbx_edit.html", signed_in, store, current, status=exc.status,
                error=exc.message, content=content, description=description,
                precondition=precondition, description_sha=description_sha, diff=None,
            )  # fmt: skip
        notice = "saved" if fields else "unchanged"
        return RedirectResponse(f"{entry_url(store.id, entry_id)}?notice={notice}", 303)

    def gone(
        self, request: Request, signed_in: SignedIn, store: DbxStore, content: str, description: str
    ) -> Response:
        return self.render(
            request, "dbx_gone.html", signed_in, store, status=404, error=GONE,
            title="Entry deleted", content=content, description=description,
        )  # fmt: skip

    async def delete_form(self, request: Request) -> Response:
        signed_in, store, entry = await self.load_entry(request)
        return await self.entry_render(request, "dbx_delete.html", signed_in, store, entry)

    async def delete(self, request: Request) -> Response:
        signed_in, store, entry = await self.load_entry(request)
        form = await self.console.post_form(request, signed_in)
        try:
            expected = validation.sha256_field(form.get("precondition", ""), "precondition")
            await self.dbx.delete_entry(store.id, entry.id, expected_sha256=expected)
        except PreconditionFailedError:
            return await self.entry_render(
                request, "dbx_delete.html", signed_in, store, entry, status=409, error=CHANGED
            )
        back = entries_url(store.id, entry.actor_id, entry.session_id, entry.session_id is None)
        return RedirectResponse(back + "&notice=entry-deleted", 303)

    async def new_page(
        self,
        request: Request,
        signed_in: SignedIn,
        store: DbxStore,
        form: dict[str, str],
        *,
        status: int = 200,
        error: str | None = None,
    ) -> Response:
        return self.render(
            request, "dbx_new.html", signed_in, store, status=status, error=error,
            title=f"New entry in {store.id}", form=form,
        )  # fmt: skip

    async def new_form(self, request: Request) -> Response:
        signed_in, store = await self.load_store(request)
        params = request.query_params
        form = {"actor": params.get("actor", ""), "session": params.get("session", ""), "path": "/"}
        return await self.new_page(request, signed_in, store, form)

    async def create(self, request: Request) -> Response:
        signed_in, store = await self.load_store(request)
        form = await self.console.post_form(request, signed_in)
        try:
            entry = await self.dbx.create_entry(
                store.id,
                NewEntry(
                    entry_id=None,
                    actor_id=check.actor_id(form.get("actor")),
                    session_id=check.session_id(form.get("session")),
                    path=check.new_entry_path(form.get("path")),
                    content=check.content(textarea(form.get("content", ""))),
                    description=check.description(textarea(form.get("description", ""))),
                    source_type=check.source_type(None),
                ),
            )
        except ApiError as exc:
            return await self.new_page(
                request, signed_in, store, form, status=exc.status, error=exc.message
            )
        return RedirectResponse(f"{entry_url(store.id, entry.id)}?notice=entry-created", 303)

    async def search_page(self, request: Request) -> Response:
        signed_in, store = await self.load_store(request)
        params = request.query_params
        actor, session, query = (
            params.get("actor", ""),
            params.get("session", ""),
            params.get("q", ""),
        )
        results: list[tuple[DbxEntry, str]] = []
        error, status = None, 200
        if query.strip():
            try:
                if not actor:
                    raise BadRequestError("Actor: required (a search looks at one actor)")
                hits = await self.dbx.search_entries(
                    store.id,
                    SearchRequest(
                        actor_id=check.actor_id(actor),
                        query=validate_query(query),
                        limit=SEARCH_LIMIT,
                        session_id=check.session_id(session),
                    ),
                    with_content=True,
                )
                results = [(entry, best_line(entry.content or "", query)) for entry, _ in hits]
            except ApiError as exc:
                error, status = exc.message, exc.status
        return self.render(
            request, "dbx_search.html", signed_in, store, status=status, error=error,
            title=f"Search {store.id}", actor=actor, session=session, query=query,
            results=results, searched=bool(query.strip()) and error is None,
        )  # fmt: skip

    def routes(self) -> list[Route]:
        base = "/databricks/{store_id}"
        entry = base + "/entries/{entry_id}"
        return [
            Route(base, self.store_page, methods=["GET"]),
            Route(base + "/actor", self.actor_page, methods=["GET"]),
            Route(base + "/entries", self.entries_page, methods=["GET"]),
            Route(base + "/search", self.search_page, methods=["GET"]),
            Route(base + "/new", self.new_form, methods=["GET"]),
            Route(base + "/new", self.create, methods=["POST"]),
            Route(entry, self.entry_page, methods=["GET"]),
            Route(entry + "/edit", self.edit_form, methods=["GET"]),
            Route(entry + "/edit", self.save, methods=["POST"]),
            Route(entry + "/delete", self.delete_form, methods=["GET"]),
            Route(entry + "/delete", self.delete, methods=["POST"]),
        ]
