"""A store's page over plain HTTP (the app in process): the tree's names in their folder, sizes,
last changes and conflict badges, and the panel on how to mount the store and use it over MCP,
with an agent-chosen store name quoted for a shell and escaped."""

from __future__ import annotations

import html
import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.test_http import KEY, OTHER, browser, sign_in
from memfs.contract.models import Actor
from memfs.core.ops.durable import conflict_path
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.console.pages.store import conflict_copy_of, usage_lines
from memfs.server.console.wording import ago, human_size, writer
from memfs.server.db.ids import api_key_id

FILE_ROW = re.compile(r'<li class="file">(.*?)</li>', re.S)


def rows_of(page: str) -> list[str]:
    """Each memory's row of the tree, its tags removed and its spaces squeezed."""
    return [
        " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())
        for row in FILE_ROW.findall(page)
    ]


async def test_the_tree_shows_names_in_their_folder_with_size_and_last_change(
    tmp_path: Path,
) -> None:
    now = datetime.now(UTC)
    clock = [now - timedelta(hours=3)]  # what the storage's clock says: set before each write
    storage = await SqliteStorage.open(tmp_path / "memfs.db", clock=lambda: clock[0])
    try:
        store = await storage.create_store(name="Tree", description="", metadata={})
        mine = Actor("api_actor", api_key_id(KEY))
        theirs = Actor("api_actor", api_key_id(OTHER))
        await storage.create_memory(
            store.id, path="/readme.md", content="hi", actor=Actor("session_actor", "sesn_mount7")
        )
        clock[0] = now - timedelta(minutes=7)
        await storage.create_memory(
            store.id, path="/projects/alpha/plan.md", content="x" * 1234, actor=mine
        )
        clock[0] = now
        await storage.create_memory(store.id, path="/projects/b.md", content="", actor=theirs)
        app = create_app(storage, [KEY, OTHER])
        async with browser(app) as client:
            await sign_in(client)
            page = (await client.get(f"/console/stores/{store.id}")).text
    finally:
        await storage.aclose()
    # folders first, then the folder's memories, each by its name in its folder
    assert rows_of(page) == [
        "plan.md 1.2 kB changed 7 min ago by you",
        f"b.md 0 B changed just now by key {api_key_id(OTHER)[:15]}…",
        "readme.md 2 B changed 3 h ago by session sesn_mount7",
    ]
    assert page.index("<summary>projects/</summary>") < page.index("<summary>alpha/</summary>")
    assert page.index(">alpha/<") < page.index(">plan.md<") < page.index(">b.md<")
    assert page.index(">b.md<") < page.index(">readme.md<")
    seven = (now - timedelta(minutes=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    exact = (now - timedelta(minutes=7)).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f'<time datetime="{seven}" title="{exact}">7 min ago</time>' in page
    assert f'title="{api_key_id(OTHER)}"' in page  # the writer's whole id on hover


async def test_conflict_copies_and_the_memory_they_were_saved_beside_have_a_badge(
    tmp_path: Path,
) -> None:
    storage = await SqliteStorage.open(tmp_path / "memfs.db")
    actor = Actor("api_actor", api_key_id(KEY))
    copy = conflict_path("/notes/today.md", datetime(2026, 11, 30, 10, 15, tzinfo=UTC))
    try:
        store = await storage.create_store(name="Conflicts", description="", metadata={})
        for path in ("/notes/today.md", copy, "/notes/other.md", "/notes/x.conflict-soon.md"):
            await storage.create_memory(store.id, path=path, content="t", actor=actor)
        app = create_app(storage, [KEY])
        async with browser(app) as client:
            await sign_in(client)
            page = (await client.get(f"/console/stores/{store.id}")).text
    finally:
        await storage.aclose()
    badges = {row.split()[0]: "conflict" in row.split()[1:3] for row in rows_of(page)}
    assert badges == {
        "other.md": False,
        "today.conflict-20261130T101500Z.md": True,
        "today.md": True,
        "x.conflict-soon.md": False,
    }
    assert '<span class="badge conflict">conflict copy</span>' in page


def test_a_conflict_copy_is_recognised_by_the_name_a_mount_gives_it() -> None:
    when = datetime(2026, 11, 30, 10, 15, tzinfo=UTC)
    for path in ("/a/notes.md", "/a/b.c.txt", "/README", "/a/.hidden"):
        name = path.rpartition("/")[2]
        for attempt in (0, 1, 12):
            copy = conflict_path(path, when, attempt).rpartition("/")[2]
            assert conflict_copy_of(copy) == name, copy
    assert conflict_copy_of("notes.md") is None
    assert conflict_copy_of("notes.conflict-2026.md") is None


async def test_the_panel_shows_how_to_mount_and_serve_the_store_with_its_name_quoted(
    storage: SqliteStorage,
) -> None:
    hostile = "it's <b>$(rm -rf ~)</b>; `x`"
    store = await storage.create_store(name=hostile, description="", metadata={})
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        await sign_in(client)
        page = (await client.get(f"/console/stores/{store.id}")).text
        https = await client.get(
            f"/console/stores/{store.id}", headers={"x-forwarded-proto": "https"}
        )
    found = re.search(r'<pre class="commands"><code>(.*?)</code></pre>', page, re.S)
    assert found is not None
    panel = html.unescape(found.group(1))
    quoted = shlex.quote(hostile)
    assert panel.splitlines() == [
        "export ANTHROPIC_BASE_URL=http://memfs.test",
        f"memfs mount {quoted} ~/memory",
        f"memfs mcp {quoted}",
        f"memfs mcp --print-config {quoted}",
    ]
    assert shlex.split(panel.splitlines()[1])[2] == hostile  # a shell reads the name back
    assert "<b>" not in page and "&lt;b&gt;$(rm -rf ~)&lt;/b&gt;" in page  # escaped
    assert KEY not in page and KEY not in https.text  # never a key
    assert "export ANTHROPIC_BASE_URL=https://memfs.test" in https.text


def test_a_store_name_like_an_option_goes_after_double_dash() -> None:
    lines = usage_lines("--read-only", "http://h:1")
    assert lines[1:] == [
        "memfs mount -- --read-only ~/memory",
        "memfs mcp -- --read-only",
        "memfs mcp --print-config -- --read-only",
    ]


def test_sizes_times_and_writers_in_words() -> None:
    assert [human_size(n) for n in (0, 999, 1234, 9960, 102_400, 999_499, 999_500)] == [
        "0 B",
        "999 B",
        "1.2 kB",
        "10 kB",
        "102 kB",
        "999 kB",
        "1.0 MB",
    ]
    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    spans = (-30, 59, 60, 3599, 3600, 86_400, 2 * 86_400, 40 * 86_400)
    assert [ago(now - timedelta(seconds=s), now) for s in spans] == [
        "just now",
        "just now",
        "1 min ago",
        "59 min ago",
        "1 h ago",
        "1 day ago",
        "2 days ago",
        "on 2026-10-26",
    ]
    key = Actor("api_actor", "apikey_0123456789abcdef01234567")
    assert writer(key) == "key apikey_01234567…"
    assert writer(key, me=key.id) == "you"
    assert writer(Actor("session_actor", "sesn_abc")) == "session sesn_abc"
    assert writer(None) == "unknown"
