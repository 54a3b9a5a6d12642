"""The history pages: a memory's versions, one version, two compared, restore, redact, the
store's whole history and the store as it was at a moment.

- ``…/memories/{memory_id}/history``: the memory's versions newest first (``PAGE_SIZE`` a page,
  "Older versions" continues after the last one's store sequence), each with its time (short,
  and how long ago), operation, path, writer (short: ``wording.writer``; a link to the store's
  history filtered by that key or session), lines added and removed against the version before
  (``line_changes``), size and state; two picked and compared (``…/history/compare``, a
  line diff). It works for a deleted memory too: versions outlive their memory.
- ``…/versions/{version_id}``: one version's content, as the memory page shows it (rendered
  Markdown, or its numbered lines: ``console.markdown``); "Restore" (a POST) makes it the
  memory's content again, as a new version whose update carries the precondition of the head
  the page showed (a change meanwhile is a 409, nothing overwritten), or creates the memory
  again at the version's path if it was deleted (a path taken meanwhile is a 409 naming the
  memory there); "Redact" (``…/redact``: a confirmation with a box to tick) scrubs the version,
  attributed to the signed-in key. The head of a live memory has no "Redact" (the API's rule);
  the storage refuses it anyway (its message on the page).
- ``/stores/{id}/history``: every version of the store, newest first, filtered as the API
  filters (operation, session, key, a time range), paginated, in the same columns; each links
  to its version and its memory's history.
- ``/stores/{id}/as-of?at=TIME``: the store at that moment (what ``.versions/TIME/`` shows in a
  mount: the rules of ``memfs.contract.version_view``), read-only, each memory a link to its version
  of then.

The first page of a memory's history and of the store's (without a "To" that ended it) is
live (``memfs.server.console.live``): it reloads at a change of what it lists, unless a field
of it is being typed into; older pages do not change.

Everything shown is agent-written and escaped by the templates; every POST goes through
``Console.post_form`` (origin and CSRF token).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any, cast, get_args
from urllib.parse import urlencode

import trio
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memfs.contract.errors import (
    ApiError,
    BadRequestError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
)
from memfs.contract.models import Actor, Memory, MemoryStore, MemoryVersion, Operation, format_time
from memfs.contract.version_view import files_at, infer_paths
from memfs.server.console.context import Console
from memfs.server.console.diff import LineCount, diff_table, line_counts
from memfs.server.console.live import memory_stores_target
from memfs.server.console.markdown import content_view
from memfs.server.console.pages.store import build_tree, memory_opener, memory_url
from memfs.server.console.pages.stores import store_url
from memfs.server.console.sessions import SignedIn
from memfs.server.console.storage import ConsoleStorage, VersionMark
from memfs.server.console.wording import WRITER_KINDS
from memfs.server.memory_stores import validation
from memfs.server.memory_stores.storage import VersionFilter

log = logging.getLogger(__name__)

PAGE_SIZE = 50
OPERATIONS: tuple[str, ...] = get_args(Operation)
REDACT_CONFIRM = "erase"
MAX_ID = 200  # a filter's id longer than any the server mints is no id

CHANGED = "This memory changed since you opened this page, so nothing was restored. Look again."
NOT_CONFIRMED = "Tick the box to confirm: nothing was redacted."
NO_CONTENT = "This version has no content to restore ({why})."
TAKEN = "The path {path} is taken by another memory now, so nothing was restored."
BAD_TIME = (
    "{field}: {value!r} is not a time; write it as 2026-12-03T10:15:03Z "
    "(UTC; seconds, a fraction and an offset are optional) or 2026-12-03"
)


@dataclass(frozen=True, slots=True)
class AtMoment:
    """A memory as the store held it at a moment: its path then and its version of then."""

    path: str
    memory_id: str
    version_id: str
    redacted: bool
    size: int | None


def actor_text(actor: Actor | None) -> str:
    """Who wrote a version, in words: "session sesn_…", "key apikey_…"."""
    if actor is None:
        return "unknown"
    return f"{WRITER_KINDS.get(actor.type, actor.type)} {actor.id}"


def parse_moment(value: str, field: str) -> datetime:
    """A time typed in a field: ISO 8601 (``Z`` or an offset; none is UTC), or a date alone
    (midnight UTC); BadRequestError otherwise."""
    text = value.strip()
    try:
        if len(text) == 10:
            moment = datetime.combine(datetime.fromisoformat(text).date(), time(), UTC)
        else:
            moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequestError(BAD_TIME.format(field=field, value=value)) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def store_at(latest: list[VersionMark], histories: list[VersionMark]) -> list[AtMoment]:
    """The store's memories at a moment, in path order, from each memory's newest version then
    (``latest``, in the store's order) and the whole history (oldest first) of those whose
    version then is redacted: the rules of ``.versions/`` (``memfs.contract.version_view``)."""
    by_memory: dict[str, list[VersionMark]] = {}
    for mark in histories:
        by_memory.setdefault(mark.memory_id, []).append(mark)
    path_of: dict[str, str | None] = {}
    for versions in by_memory.values():
        inferred = infer_paths([mark.path for mark in versions])
        path_of.update(zip((mark.id for mark in versions), inferred, strict=True))
    files = files_at((mark, path_of.get(mark.id, mark.path)) for mark in latest)
    return [
        AtMoment(path, mark.memory_id, mark.id, mark.redacted, mark.size)
        for path, mark in sorted(files.items(), key=lambda item: item[0].encode())
    ]


async def line_changes(
    console: ConsoleStorage, store_id: str, versions: list[MemoryVersion]
) -> dict[str, LineCount]:
    """The lines each version added and removed against its memory's version before it (none
    for a redacted side), in one query; counted in a worker thread (``line_counts`` caps its
    work, yet a page may hold 50 contents of 100 KiB)."""
    pairs = await console.version_changes(store_id, [version.id for version in versions])

    def count() -> dict[str, LineCount]:
        return {
            version_id: line_counts(pair.previous, pair.content)
            for version_id, pair in pairs.items()
            if pair.content is not None and pair.previous is not None
        }

    return await trio.to_thread.run_sync(count)


def writer_filter(store_id: str, actor: Actor | None) -> str | None:
    """The store's history of that key's or session's writes (None for other writers: the
    history filters by these two only)."""
    field = {"api_actor": "key", "session_actor": "session"}.get(actor.type) if actor else None
    if actor is None or field is None:
        return None
    return f"{store_url(store_id)}/history?" + urlencode({field: actor.id})


async def store_as_of(console: ConsoleStorage, store_id: str, moment: datetime) -> list[AtMoment]:
    """The store's memories at ``moment``, in path order (``store_at``), in one query, or two
    when a memory's version then is redacted."""
    latest = await console.latest_versions(store_id, moment)
    redacted = [mark.memory_id for mark in latest if mark.redacted]
    histories = await console.version_marks(store_id, redacted) if redacted else []
    return store_at(latest, histories)


def version_url(store_id: str, memory_id: str, version_id: str) -> str:
    return f"{memory_url(store_id, memory_id)}/versions/{version_id}"


def _query_id(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    if len(value) > MAX_ID:
        raise BadRequestError(f"{name}: longer than any id ({MAX_ID} characters)")
    return value or None


def _before(request: Request) -> int | None:
    value = request.query_params.get("before", "")
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise BadRequestError("before: not a position in the history")
    return int(value)


class HistoryPages:
    """The history pages of a memory and of a store (module doc)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.storage = self.console.storage
        self.render = self.console.renderer.page

    async def memory_state(
        self, store: MemoryStore, memory_id: str
    ) -> tuple[Memory | None, MemoryVersion]:
        """The memory (None if deleted) and its newest version (NotFoundError: never was)."""
        newest = await self.storage.list_versions(
            store.id, VersionFilter(memory_id=memory_id), after=None, limit=1, with_content=False
        )
        if not newest.items:
            raise NotFoundError(f"memory {memory_id!r} has no history in this store")
        try:
            memory: Memory | None = await self.storage.get_memory(store.id, memory_id)
        except NotFoundError:
            memory = None
        return memory, newest.items[0]

    def common(
        self, store: MemoryStore, memory_id: str, memory: Memory | None, newest: MemoryVersion
    ) -> dict[str, Any]:
        path = memory.path if memory is not None else newest.path
        return {
            "store": store,
            "store_url": store_url(store.id),
            "memory_id": memory_id,
            "memory": memory,
            "memory_path": path or "(redacted path)",
            "memory_url": memory_url(store.id, memory_id),
            "head_id": memory.memory_version_id if memory is not None else None,
            "actor_text": actor_text,
            "moment": format_time,
            "as_of_url": f"{store_url(store.id)}/as-of",
            "version_url": lambda version_id: version_url(store.id, memory_id, version_id),
            "writer_url": lambda actor: writer_filter(store.id, actor),
        }

    async def memory_history(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        memory_id = request.path_params["memory_id"]
        memory, newest = await self.memory_state(store, memory_id)
        before = _before(request)
        page = await self.storage.list_versions(
            store.id,
            VersionFilter(memory_id=memory_id),
            after=before,
            limit=PAGE_SIZE,
            with_content=False,
        )
        context = self.common(store, memory_id, memory, newest)
        # the first page gains a version at each change of the memory: it reloads (older ones
        # do not change)
        live = None
        if before is None:
            live = await memory_stores_target(self.console, store.id, "reload", memory_id=memory_id)
        return self.render(
            request,
            "history.html",
            signed_in=signed_in,
            title=f"History of {context['memory_path']}",
            versions=page.items,
            changes=await line_changes(self.console.console_storage, store.id, page.items),
            older=page.next,
            first_page=before is None,
            live=live,
            **context,
        )

    async def compare(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        memory_id = request.path_params["memory_id"]
        memory, newest = await self.memory_state(store, memory_id)
        context = self.common(store, memory_id, memory, newest)
        first, second = _query_id(request, "from"), _query_id(request, "to")
        if first is None or second is None:
            raise BadRequestError("pick two versions to compare (one 'From', one 'To')")
        sides = [
            await self.storage.get_version(store.id, version_id) for version_id in (first, second)
        ]
        if any(side.memory_id != memory_id for side in sides):
            raise NotFoundError("that version is not one of this memory's")
        old, new = sides
        redacted = [side for side in sides if side.redacted]
        diff = None if redacted else diff_table(old.content or "", new.content or "")
        # the two views are links: the page is a GET of its query, the view one more field
        compare_url = f"{context['memory_url']}/history/compare?" + urlencode(
            {"from": first, "to": second}
        )
        return self.render(
            request,
            "compare.html",
            signed_in=signed_in,
            title=f"Compare versions of {context['memory_path']}",
            old=old,
            new=new,
            redacted=redacted,
            diff=diff,
            split=request.query_params.get("view") == "split",
            unified_url=compare_url,
            split_url=compare_url + "&view=split",
            **context,
        )

    async def load_version(
        self,
        request: Request,
    ) -> tuple[SignedIn, dict[str, Any], MemoryVersion]:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        memory_id = request.path_params["memory_id"]
        version = await self.storage.get_version(store.id, request.path_params["version_id"])
        if version.memory_id != memory_id:
            raise NotFoundError("that version is not one of this memory's")
        memory, newest = await self.memory_state(store, memory_id)
        return signed_in, self.common(store, memory_id, memory, newest), version

    async def version_page(
        self,
        request: Request,
        signed_in: SignedIn,
        context: dict[str, Any],
        version: MemoryVersion,
        *,
        status: int = 200,
        error: str | None = None,
        taken_by: str | None = None,
    ) -> Response:
        content = await content_view(
            context["version_url"](version.id),
            version.path,
            version.content or "",
            request.query_params.get("view"),
            memory_opener(context["store"].id),
        )
        return self.render(
            request,
            "version.html",
            signed_in=signed_in,
            status=status,
            error=error,
            title=f"{context['memory_path']} at {format_time(version.created_at)}",
            version=version,
            taken_by=taken_by,
            content=content,
            **context,
        )

    async def version_view(self, request: Request) -> Response:
        signed_in, context, version = await self.load_version(request)
        return await self.version_page(request, signed_in, context, version)

    async def restore(self, request: Request) -> Response:
        signed_in, context, version = await self.load_version(request)
        form = await self.console.post_form(request, signed_in)
        store: MemoryStore = context["store"]
        memory: Memory | None = context["memory"]
        if version.content is None:
            why = "redacted" if version.redacted else "the memory's deletion"
            raise BadRequestError(NO_CONTENT.format(why=why))
        if memory is not None and memory.content_sha256 == version.content_sha256:
            # the update would be a no-op (no version): say so rather than "Restored"
            return RedirectResponse(memory_url(store.id, memory.id) + "?notice=same", 303)
        try:
            if memory is not None:
                expected = validation.sha256_field(form.get("precondition", ""), "precondition")
                await self.storage.update_memory(
                    store.id,
                    memory.id,
                    content=version.content,
                    path=None,
                    expected_sha256=expected,
                    actor=signed_in.actor,
                )
                target = memory.id
            else:
                created = await self.storage.create_memory(
                    store.id,
                    path=version.path or "",
                    content=version.content,
                    actor=signed_in.actor,
                )
                target = created.id
        except PreconditionFailedError:
            return await self.version_page(
                request, signed_in, context, version, status=409, error=CHANGED
            )
        except PathConflictError as exc:
            error = TAKEN.format(path=version.path)
            return await self.version_page(
                request, signed_in, context, version, status=409, error=error,
                taken_by=exc.conflicting_memory_id,
            )  # fmt: skip
        except ApiError as exc:
            return await self.version_page(
                request, signed_in, context, version, status=exc.status, error=exc.message
            )
        return RedirectResponse(memory_url(store.id, target) + "?notice=restored", 303)

    async def redact_form(self, request: Request) -> Response:
        signed_in, context, version = await self.load_version(request)
        return self.render(
            request,
            "redact.html",
            signed_in=signed_in,
            title=f"Redact a version of {context['memory_path']}?",
            version=version,
            **context,
        )

    async def redact(self, request: Request) -> Response:
        signed_in, context, version = await self.load_version(request)
        form = await self.console.post_form(request, signed_in)
        error, status = None, 400
        if form.get("confirm") != REDACT_CONFIRM:
            error = NOT_CONFIRMED
        else:
            try:
                await self.storage.redact_version(
                    context["store"].id, version.id, actor=signed_in.actor
                )
            except ApiError as exc:
                error, status = exc.message, exc.status
        if error is not None:
            return self.render(
                request,
                "redact.html",
                signed_in=signed_in,
                status=status,
                error=error,
                title=f"Redact a version of {context['memory_path']}?",
                version=version,
                **context,
            )
        return RedirectResponse(context["version_url"](version.id) + "?notice=redacted", 303)

    async def store_history(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        query = {
            name: request.query_params.get(name, "")
            for name in ("operation", "session", "key", "from", "to")
        }
        versions: list[MemoryVersion] = []
        older: int | None = None
        error, status = None, 200
        try:
            operation = query["operation"] or None
            if operation is not None and operation not in OPERATIONS:
                raise BadRequestError(f"operation: one of {', '.join(OPERATIONS)}")
            flt = VersionFilter(
                operation=cast(Operation | None, operation),
                session_id=_query_id(request, "session"),
                api_key_id=_query_id(request, "key"),
                created_gte=parse_moment(query["from"], "From") if query["from"] else None,
                created_lte=parse_moment(query["to"], "To") if query["to"] else None,
            )
            page = await self.storage.list_versions(
                store.id, flt, after=_before(request), limit=PAGE_SIZE, with_content=False
            )
            versions, older = page.items, page.next
        except BadRequestError as exc:
            error, status = exc.message, exc.status
        more = {name: value for name, value in query.items() if value}
        # the first page gains the store's new versions, unless "To" already ended it
        live = None
        if _before(request) is None and not query["to"]:
            live = await memory_stores_target(self.console, store.id, "reload")
        return self.render(
            request,
            "store_history.html",
            live=live,
            signed_in=signed_in,
            status=status,
            error=error,
            title=f"History of {store.name}",
            store=store,
            store_url=store_url(store.id),
            query=query,
            operations=OPERATIONS,
            filtered=bool(more),
            versions=versions,
            changes=await line_changes(self.console.console_storage, store.id, versions),
            writer_url=lambda actor: writer_filter(store.id, actor),
            older=older,
            older_query=more,
            actor_text=actor_text,
            version_url=lambda v: version_url(store.id, v.memory_id, v.id),
            history_url=lambda v: memory_url(store.id, v.memory_id) + "/history",
            moment=format_time,
            as_of_url=f"{store_url(store.id)}/as-of",
        )

    async def as_of(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        store = await self.storage.get_store(request.path_params["store_id"])
        at = request.query_params.get("at", "")
        moment: datetime | None = None
        memories: list[AtMoment] = []
        error, status = None, 200
        if at.strip():
            try:
                moment = parse_moment(at, "Show the store as of")
            except BadRequestError as exc:
                error, status = exc.message, exc.status
            else:
                memories = await store_as_of(self.console.console_storage, store.id, moment)
        return self.render(
            request,
            "store_at.html",
            signed_in=signed_in,
            status=status,
            error=error,
            title=f"{store.name} as of {at}" if moment else f"{store.name} at a moment",
            store=store,
            store_url=store_url(store.id),
            at=at,
            moment=format_time(moment) if moment else None,
            count=len(memories),
            tree=build_tree(memories),
            version_url=lambda m: version_url(store.id, m.memory_id, m.version_id),
        )

    def routes(self) -> list[Route]:
        memory = "/stores/{store_id}/memories/{memory_id}"
        version = memory + "/versions/{version_id}"
        return [
            Route(memory + "/history", self.memory_history, methods=["GET"]),
            Route(memory + "/history/compare", self.compare, methods=["GET"]),
            Route(version, self.version_view, methods=["GET"]),
            Route(version + "/restore", self.restore, methods=["POST"]),
            Route(version + "/redact", self.redact_form, methods=["GET"]),
            Route(version + "/redact", self.redact, methods=["POST"]),
            Route("/stores/{store_id}/history", self.store_history, methods=["GET"]),
            Route("/stores/{store_id}/as-of", self.as_of, methods=["GET"]),
        ]
