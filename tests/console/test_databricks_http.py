"""The console's Databricks pages over plain HTTP (the app in process): the counts of actors and
sessions on both SQL backends, a cross-site or stale edit changing nothing, a description edit
leaving the content alone, refusals as one-line pages, and pages without live updates when the
server has no change hub."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.contract.models import sha256_hex
from memfs.server.app import create_app
from memfs.server.backends.storage import Storage
from memfs.server.console.sql import SqlConsole
from memfs.server.databricks.storage import EntryPatch, NewEntry
from memfs.server.db.notify import ChangeHub

KEY = "sk-console-" + "d" * 30
BASE = "http://memfs.test"
TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
SOURCE = "MANAGED_MEMORY_ENTRY_SOURCE_TYPE_AGENT"


def entry(actor: str, path: str, session: str | None = None, content: str | None = "x") -> NewEntry:
    return NewEntry(None, actor, session, path, content, None, SOURCE)


@asynccontextmanager
async def signed_in(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A cookie-keeping client (as a browser is), signed in."""
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        form = await client.get("/console/sign-in")
        await client.post("/console/sign-in", data={"csrf": csrf_of(form), "api_key": KEY})
        yield client


def csrf_of(page: httpx.Response) -> str:
    found = TOKEN.search(page.text)
    assert found is not None, page.text
    return found.group(1)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_actor_and_session_counts_on_both_backends(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from memfs.server.backends.postgres import PostgresStorage
    from memfs.server.backends.sqlite import SqliteStorage
    from memfs.server.backends.storage import SqlStorage

    storage: SqlStorage
    if backend == "postgres":
        storage = await PostgresStorage.open(request.getfixturevalue("pg_url"), pool_size=2)
    else:
        storage = await SqliteStorage.open(tmp_path / "dbx.db")
    try:
        dbx = storage.databricks
        await dbx.create_store("counts", description=None, creator="t")
        await dbx.create_store("other", description=None, creator="t")
        for made in (
            entry("bob", "/a"),
            entry("alice", "/a"),
            entry("alice", "/b"),
            entry("alice", "/a", "s-2"),
            entry("alice", "/b", "s-2"),
            entry("alice", "/a", "S-1"),
            entry("Zed", "/a"),
        ):
            await dbx.create_entry("counts", made)
        await dbx.create_entry("other", entry("carol", "/a"))
        actors = await SqlConsole(storage).dbx_actors("counts", limit=10)
        # byte order (upper case first), as the API's listings
        assert [(a.key, a.entries) for a in actors] == [("Zed", 1), ("alice", 5), ("bob", 1)]
        assert [a.key for a in await SqlConsole(storage).dbx_actors("counts", limit=2)] == [
            "Zed",
            "alice",
        ]
        sessions = await SqlConsole(storage).dbx_sessions("counts", "alice", limit=10)
        assert [(s.key, s.entries) for s in sessions] == [(None, 2), ("S-1", 1), ("s-2", 2)]
        # the next page of each: strictly after the last key shown ("": no session)
        after_zed = await SqlConsole(storage).dbx_actors("counts", limit=10, after="Zed")
        assert [a.key for a in after_zed] == ["alice", "bob"]
        after_none = await SqlConsole(storage).dbx_sessions("counts", "alice", limit=1, after="")
        assert [(s.key, s.entries) for s in after_none] == [("S-1", 1)]
        assert await SqlConsole(storage).dbx_sessions("counts", "alice", limit=9, after="s-2") == []
        assert await SqlConsole(storage).dbx_actors("no-such", limit=10) == []
        assert await SqlConsole(storage).dbx_sessions("counts", "nobody", limit=10) == []
        # where a live page's stream starts: the newest change (7 creates), also across the
        # deletion of a store and its creation again under the same id (numbered on)
        assert await SqlConsole(storage).dbx_newest_change("counts") == 7
        await dbx.delete_store("other")  # its create (1) and its deletion (2)
        await dbx.create_store("other", description=None, creator="t")
        assert await SqlConsole(storage).dbx_newest_change("other") == 2
        assert (await dbx.change_bounds("other")).newest == 2
        assert await SqlConsole(storage).dbx_newest_change("no-such") == 0
    finally:
        await storage.aclose()


async def test_edits_are_same_site_fresh_and_change_only_what_was_typed(storage: Storage) -> None:
    dbx = storage.databricks
    await dbx.create_store("edits", description=None, creator="t")
    made = await dbx.create_entry("edits", entry("alice", "/a.md", content="one\n"))
    url = f"/console/databricks/edits/entries/{made.id}/edit"
    async with signed_in(create_app(storage, [KEY])) as client:
        form = await client.get(url)
        assert form.status_code == 200
        fields = {
            "csrf": csrf_of(form),
            "precondition": sha256_hex("one\n"),
            "description_sha": sha256_hex(""),
            "content": "two\n",
            "description": "",
        }
        cross = await client.post(url, data=fields, headers={"sec-fetch-site": "cross-site"})
        stale = await client.post(url, data={**fields, "csrf": "0" * 64})
        assert cross.status_code == stale.status_code == 403
        assert (await dbx.get_entry("edits", made.id, with_content=True)).content == "one\n"
        # the description alone: the content field is as loaded, so it is not written, and a
        # content change made meanwhile by someone else is caught, not overwritten
        await dbx.update_entry("edits", made.id, _patch(content="theirs\n"))
        described = await client.post(
            url, data={**fields, "content": "one\n", "description": "about a"}
        )
        assert described.status_code == 409 and "Someone changed this entry" in described.text
        now = await dbx.get_entry("edits", made.id, with_content=True)
        assert (now.content, now.description) == ("theirs\n", None)
        saved = await client.post(
            url,
            data={
                **fields,
                "precondition": sha256_hex("theirs\n"),
                "content": "theirs\n",
                "description": "about a",
            },
        )
        assert saved.status_code == 303 and saved.headers["location"].endswith("?notice=saved")
        now = await dbx.get_entry("edits", made.id, with_content=True)
        assert (now.content, now.description) == ("theirs\n", "about a")
        # an entry without content: its precondition is the hash of ""
        bare = await dbx.create_entry("edits", entry("alice", "/bare.md", content=None))
        bare_url = f"/console/databricks/edits/entries/{bare.id}/edit"
        page = await client.get(bare_url)
        assert f'value="{sha256_hex("")}"' in page.text
        filled = await client.post(
            bare_url, data={**fields, "precondition": sha256_hex(""), "content": "now\n"}
        )
        assert filled.status_code == 303
        assert (await dbx.get_entry("edits", bare.id, with_content=True)).content == "now\n"


def form_of(page: httpx.Response) -> dict[str, str]:
    """The edit form's fields as a browser would post them (a textarea drops the newline that
    follows its opening tag)."""
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', page.text))
    for name, text in re.findall(r'<textarea id="\w+" name="(\w+)"[^>]*>\n?(.*?)</textarea>',
                                 page.text, re.S):  # fmt: skip
        fields[name] = html.unescape(text)
    return fields


async def test_a_conflict_keeps_what_each_side_changed_and_only_that(storage: Storage) -> None:
    """Someone else changes the description while I change it too: a conflict, nothing written,
    theirs shown; "Save over theirs" then writes mine. Someone else changes the content while I
    change only the description: a conflict; "Save over theirs" as the page comes writes my
    description and keeps their content (the form holds theirs where I typed nothing)."""
    dbx = storage.databricks
    await dbx.create_store("both", description=None, creator="t")
    made = await dbx.create_entry("both", entry("alice", "/a.md", content="one\n"))
    url = f"/console/databricks/both/entries/{made.id}/edit"
    async with signed_in(create_app(storage, [KEY])) as client:
        mine = {**form_of(await client.get(url)), "description": "mine"}
        await dbx.update_entry("both", made.id, _patch(description="theirs"))
        clash = await client.post(url, data=mine)
        assert clash.status_code == 409 and "Someone changed this entry" in clash.text
        assert "<h2>Their description</h2>" in clash.text
        now = await dbx.get_entry("both", made.id, with_content=True)
        assert (now.content, now.description) == ("one\n", "theirs")
        over = await client.post(url, data=form_of(clash))
        assert over.status_code == 303
        now = await dbx.get_entry("both", made.id, with_content=True)
        assert (now.content, now.description) == ("one\n", "mine")

        mine = {**form_of(await client.get(url)), "description": "mine again"}
        await dbx.update_entry("both", made.id, _patch(content="their content\n"))
        clash = await client.post(url, data=mine)
        assert clash.status_code == 409 and "<h2>Their description</h2>" in clash.text
        assert form_of(clash)["content"] == "their content\n"  # not my stale copy
        over = await client.post(url, data=form_of(clash))
        assert over.status_code == 303
        now = await dbx.get_entry("both", made.id, with_content=True)
        assert (now.content, now.description) == ("their content\n", "mine again")


async def test_refusals_are_one_line_pages(storage: Storage) -> None:
    dbx = storage.databricks
    await dbx.create_store("refusals", description=None, creator="t")
    made = await dbx.create_entry("refusals", entry("alice", "/a.md"))
    async with signed_in(create_app(storage, [KEY])) as client:
        assert (await client.get("/console/databricks/nope")).status_code == 404
        assert (await client.get(f"/console/databricks/nope/entries/{made.id}")).status_code == 404
        no_actor = await client.get("/console/databricks/refusals/actor")
        assert no_actor.status_code == 400 and "actor_id: required" in no_actor.text
        search = await client.get("/console/databricks/refusals/search?q=x")
        assert search.status_code == 400 and "Actor: required" in search.text
        new = await client.get("/console/databricks/refusals/new")
        fields = {"csrf": csrf_of(new), "actor": "alice", "path": "/a.md", "content": "y"}
        taken = await client.post("/console/databricks/refusals/new", data=fields)
        assert taken.status_code == 409 and 'value="/a.md"' in taken.text  # the form again
        bad = await client.post("/console/databricks/refusals/new", data={**fields, "path": "a"})
        assert bad.status_code == 400 and "must start with" in bad.text


async def test_long_listings_go_on_page_by_page_and_a_foreign_cursor_is_refused(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Actors, an actor's sessions and entries past one page: "Next page" links walk them all,
    each once, in order; a cursor of another listing (or a forged one) is a 400."""
    from memfs.server.console.pages import databricks as pages

    monkeypatch.setattr(pages, "LISTED", 2)
    dbx = storage.databricks
    await dbx.create_store("long", description=None, creator="t")
    for actor in ("a1", "a2", "a3", "a4", "a5"):
        await dbx.create_entry("long", entry(actor, "/x"))
    for session in (None, "s1", "s2", "s3"):
        for path in ("/p1", "/p2", "/p3"):
            await dbx.create_entry("long", entry("a1", path, session))

    async def walk(client: httpx.AsyncClient, url: str, link: re.Pattern[str]) -> list[str]:
        found: list[str] = []
        for _ in range(10):  # 5 actors, 4 sessions, 13 entries: at most 7 pages of 2
            page = await client.get(url)
            assert page.status_code == 200, page.text
            found += link.findall(page.text)
            more = re.search(r'<a href="([^"]+)">Next page</a>', page.text)
            if more is None:
                return found
            url = html.unescape(more.group(1))
            assert "First page" in (await client.get(url)).text
        raise AssertionError(f"still a next page after 10: {found}")

    async with signed_in(create_app(storage, [KEY])) as client:
        actors = await walk(client, "/console/databricks/long", re.compile(r"actor=(a\d)\""))
        assert actors == ["a1", "a2", "a3", "a4", "a5"]
        sessions = await walk(
            client,
            "/console/databricks/long/actor?actor=a1",
            re.compile(r"(session_less=1|session=s\d)\""),
        )
        assert sessions == ["session_less=1", "session=s1", "session=s2", "session=s3"]
        entries = await walk(
            client,
            "/console/databricks/long/entries?actor=a1",
            re.compile(r'">(/p\d|/x)</a></td>'),
        )
        assert entries == ["/p1"] * 4 + ["/p2"] * 4 + ["/p3"] * 4 + ["/x"]
        first = await client.get("/console/databricks/long")
        more = re.search(r'<a href="[^"]+page=([^"&]+)">Next page</a>', first.text)
        assert more is not None
        foreign = await client.get(f"/console/databricks/long/actor?actor=a1&page={more.group(1)}")
        assert foreign.status_code == 400 and "different listing" in foreign.text
        forged = await client.get("/console/databricks/long?page=page_AAAA")
        assert forged.status_code == 400 and "not a valid page cursor" in forged.text


async def test_without_a_change_hub_pages_are_not_live(storage: Storage) -> None:
    await storage.databricks.create_store("quiet", description=None, creator="t")
    async with signed_in(create_app(storage, [KEY])) as client:
        page = await client.get("/console/databricks/quiet")
        assert page.status_code == 200 and 'id="live"' not in page.text
        assert "live.js" not in page.text
        assert (await client.get("/console/live/databricks/quiet?after=0")).status_code == 404
    hub = ChangeHub()
    async with signed_in(create_app(storage, [KEY], change_hub=hub)) as client:
        page = await client.get("/console/databricks/quiet")
        assert 'id="live"' in page.text and "/console/static/live.js" in page.text


def _patch(**fields: str | None) -> EntryPatch:
    return EntryPatch(dict(fields))


async def test_a_listing_of_entries_says_how_long_ago_each_changed(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from memfs.server.backends.sqlite import SqliteStorage

    changed = datetime.now(UTC) - timedelta(minutes=7)
    storage = await SqliteStorage.open(tmp_path / "dbx.db", clock=lambda: changed)
    try:
        await storage.databricks.create_store("ago", description=None, creator="t")
        await storage.databricks.create_entry("ago", entry("bob", "/notes.md"))
        async with signed_in(create_app(storage, [KEY])) as client:
            page = (await client.get("/console/databricks/ago/entries?actor=bob")).text
    finally:
        await storage.aclose()
    machine = changed.strftime("%Y-%m-%dT%H:%M:%SZ")
    exact = changed.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f'<time datetime="{machine}" title="{exact}">7 min ago</time>' in page  # changed
    short = f"{changed:%b} {changed.day}, {changed:%H:%M}"  # C locale: English month names
    assert f'<time datetime="{machine}" title="{exact}">{short}</time>' in page  # created
