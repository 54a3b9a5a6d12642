"""The console's history pages over plain HTTP (the app in process): the store as of a moment
is what the mount's ``.versions/`` shows (the same rules, checked against its ``VersionIndex``
on a history with renames, redactions and deletions), paging, the API's filters, each row's
short time, writer and lines added and removed (their count capped on hostile contents), and
the refusals (an unconfirmed or cross-site redaction, a version of another memory)."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from pathlib import Path

import pytest

from console.test_http import KEY, browser, csrf_of, sign_in
from memfs.contract.models import Actor, MemoryVersion
from memfs.server.app import create_app
from memfs.server.backends.storage import Storage
from memfs.server.console.diff import (
    EXACT_COUNT_CELLS,
    EXACT_DIFF_CELLS,
    LineCount,
    Piece,
    diff_table,
    line_counts,
)
from memfs.server.console.pages.history import PAGE_SIZE, store_as_of
from memfs.server.console.sql import SqlConsole
from memfs.server.console.storage import ContentPair
from memfs.server.memory_stores.storage import VersionFilter
from memfs.versions.index import VersionIndex

AGENT = Actor("session_actor", "sesn_agent")
ROW = re.compile(r"<tr>\s*<td")


async def all_versions(storage: Storage, store_id: str) -> list[MemoryVersion]:
    """Oldest first."""
    page = await storage.list_versions(
        store_id, VersionFilter(), after=None, limit=10_000, with_content=False
    )
    return list(reversed(page.items))


async def test_the_store_as_of_each_moment_is_what_a_mount_shows(storage: Storage) -> None:
    store = await storage.create_store(name="Moments", description="", metadata={})
    s = store.id

    async def write(memory_id: str, content: str | None = None, path: str | None = None) -> None:
        await storage.update_memory(
            s, memory_id, content=content, path=path, expected_sha256=None, actor=AGENT
        )

    a = (await storage.create_memory(s, path="/a.md", content="a1", actor=AGENT)).id
    b = (await storage.create_memory(s, path="/dir/b.md", content="b1", actor=AGENT)).id
    await write(a, "a2")
    await write(b, path="/dir/c.md")  # renamed: at its old path before
    c = (await storage.create_memory(s, path="/dir/b.md", content="new b", actor=AGENT)).id
    await write(a, "a3")
    await storage.delete_memory(s, c, expected_sha256=None, actor=AGENT)
    await write(b, "b2", "/e.md")
    await storage.delete_memory(s, a, expected_sha256=None, actor=AGENT)
    history = await all_versions(storage, s)
    for version in history[1:4] + history[-3:-2]:  # redacted: their paths are inferred
        await storage.redact_version(s, version.id, actor=AGENT)
    history = await all_versions(storage, s)

    index = VersionIndex(store=None)  # type: ignore[arg-type]  # merged by hand: no store API
    index.merge(history)
    moments = [history[0].created_at - timedelta(seconds=1)]
    moments += [v.created_at for v in history] + [history[-1].created_at + timedelta(days=1)]
    seen = set()
    for moment in moments:
        expected = {path: v.id for path, v in index.view(moment).files.items()}
        shown = {m.path: m.version_id for m in await store_as_of(SqlConsole(storage), s, moment)}
        assert shown == expected, moment
        seen.add(tuple(sorted(shown)))
    assert len(seen) >= 5  # the moments differ: the comparison covers renames and deletions


async def test_history_pages_page_and_filter(storage: Storage) -> None:
    store = await storage.create_store(name="Long", description="", metadata={})
    memory = await storage.create_memory(store.id, path="/log.md", content="0", actor=AGENT)
    for n in range(1, PAGE_SIZE + 10):
        await storage.update_memory(
            store.id, memory.id, content=str(n), path=None, expected_sha256=None, actor=AGENT
        )
    other = await storage.create_memory(store.id, path="/x.md", content="x", actor=AGENT)
    await storage.delete_memory(store.id, other.id, expected_sha256=None, actor=AGENT)
    base = f"/console/stores/{store.id}"
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        first = await client.get(f"{base}/memories/{memory.id}/history")
        assert first.status_code == 200 and len(ROW.findall(first.text)) == PAGE_SIZE
        assert 'badge">current' in first.text
        older = re.search(r'href="([^"]+\?before=\d+)">Older versions', first.text)
        assert older is not None
        second = await client.get(older.group(1))
        assert len(ROW.findall(second.text)) == 10 and "Older versions" not in second.text
        assert 'badge">current' not in second.text  # the head is on the first page

        deleted = await client.get(f"{base}/history", params={"operation": "deleted"})
        assert len(ROW.findall(deleted.text)) == 1 and "/x.md" in deleted.text
        by_session = await client.get(f"{base}/history", params={"session": "sesn_agent"})
        assert len(ROW.findall(by_session.text)) == PAGE_SIZE
        by_key = await client.get(f"{base}/history", params={"key": "apikey_nobody"})
        assert "No versions match these filters." in by_key.text
        future = await client.get(f"{base}/history", params={"from": "2100-01-01"})
        assert len(ROW.findall(future.text)) == 0
        bad = await client.get(f"{base}/history", params={"to": "yesterday"})
        assert bad.status_code == 400 and "To: &#39;yesterday&#39; is not a time" in bad.text
        unknown = await client.get(f"{base}/history", params={"operation": "renamed"})
        assert unknown.status_code == 400


async def test_redaction_refusals_change_nothing(storage: Storage) -> None:
    store = await storage.create_store(name="Refusals", description="", metadata={})
    memory = await storage.create_memory(store.id, path="/s.md", content="secret", actor=AGENT)
    await storage.update_memory(
        store.id, memory.id, content="gone", path=None, expected_sha256=None, actor=AGENT
    )
    other = await storage.create_memory(store.id, path="/o.md", content="o", actor=AGENT)
    old = (await all_versions(storage, store.id))[0]
    version = f"/console/stores/{store.id}/memories/{memory.id}/versions/{old.id}"
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        form = await client.get(version + "/redact")
        token = csrf_of(form)
        unconfirmed = await client.post(version + "/redact", data={"csrf": token})
        assert unconfirmed.status_code == 400 and "Tick the box" in unconfirmed.text
        stale = await client.post(version + "/redact", data={"csrf": "0" * 64, "confirm": "erase"})
        assert stale.status_code == 403
        across = {"sec-fetch-site": "cross-site"}
        cross = await client.post(
            version + "/redact", data={"csrf": token, "confirm": "erase"}, headers=across
        )
        assert cross.status_code == 403
        assert (await storage.get_version(store.id, old.id)).content == "secret"
        # a version reached through another memory's URL is no page
        elsewhere = version.replace(memory.id, other.id)
        assert (await client.get(elsewhere)).status_code == 404
        assert (await client.get(version.replace(old.id, "memver_nope"))).status_code == 404
        done = await client.post(version + "/redact", data={"csrf": token, "confirm": "erase"})
        assert done.status_code == 303
        assert (await storage.get_version(store.id, old.id)).content is None
        # the redacted side of a comparison says so; it has nothing to restore
        head_id = (await storage.get_memory(store.id, memory.id)).memory_version_id
        compared = await client.get(
            version.split("/versions/")[0] + "/history/compare",
            params={"from": old.id, "to": head_id},
        )
        assert compared.status_code == 200
        assert f"Version <code>{old.id}</code> was redacted" in compared.text
        assert "secret" not in compared.text and 'class="diff"' not in compared.text
        page = await client.get(version)
        assert "Restore" not in page.text and "its content is gone" in page.text
        refused = await client.post(version + "/restore", data={"csrf": token})
        assert refused.status_code == 400 and "no content to restore (redacted)" in refused.text


async def test_restoring_what_the_memory_holds_says_so_and_adds_no_version(
    storage: Storage,
) -> None:
    store = await storage.create_store(name="Same", description="", metadata={})
    memory = await storage.create_memory(store.id, path="/s.md", content="one", actor=AGENT)
    await storage.update_memory(
        store.id, memory.id, content="two", path=None, expected_sha256=None, actor=AGENT
    )
    await storage.update_memory(
        store.id, memory.id, content="one", path=None, expected_sha256=None, actor=AGENT
    )
    first = (await all_versions(storage, store.id))[0]
    version = f"/console/stores/{store.id}/memories/{memory.id}/versions/{first.id}"
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        page = await client.get(version)
        sha = (await storage.get_memory(store.id, memory.id)).content_sha256
        answer = await client.post(
            version + "/restore", data={"csrf": csrf_of(page), "precondition": sha}
        )
        assert answer.status_code == 303 and answer.headers["location"].endswith("?notice=same")
        shown = await client.get(answer.headers["location"])
        assert "holds this version&#39;s content already" in shown.text
    assert len(await all_versions(storage, store.id)) == 3


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_version_marks_on_both_backends(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Versions without content: a memory's, oldest first (a redacted one without path or
    size), and each memory's newest at a moment."""
    from memfs.server.backends.postgres import PostgresStorage
    from memfs.server.backends.sqlite import SqliteStorage
    from memfs.server.backends.storage import SqlStorage

    storage: SqlStorage
    if backend == "postgres":
        storage = await PostgresStorage.open(request.getfixturevalue("pg_url"), pool_size=2)
    else:
        storage = await SqliteStorage.open(tmp_path / "marks.db")
    try:
        store = await storage.create_store(name="marks", description="", metadata={})
        memory = await storage.create_memory(store.id, path="/m.md", content="abc", actor=AGENT)
        await storage.update_memory(
            store.id, memory.id, content="de", path=None, expected_sha256=None, actor=AGENT
        )
        history = await all_versions(storage, store.id)
        await storage.redact_version(store.id, history[0].id, actor=AGENT)
        marks = await SqlConsole(storage).version_marks(store.id, [memory.id, "mem_nope"])
        assert [(m.id, m.operation, m.path, m.size, m.redacted) for m in marks] == [
            (history[0].id, "created", None, None, True),
            (history[1].id, "modified", "/m.md", 2, False),
        ]
        assert [m.created_at for m in marks] == [v.created_at for v in history]
        latest = await SqlConsole(storage).latest_versions(store.id, history[0].created_at)
        assert [m.id for m in latest] == [history[0].id]
        now = await SqlConsole(storage).latest_versions(store.id, history[1].created_at)
        assert [m.id for m in now] == [history[1].id]
        assert (
            await SqlConsole(storage).latest_versions("memstore_nope", history[1].created_at) == []
        )
        # each version beside its memory's version before it: "" before the first and for a
        # deletion, None for a redacted one
        await storage.update_memory(
            store.id, memory.id, content=None, path="/n.md", expected_sha256=None, actor=AGENT
        )
        other = await storage.create_memory(store.id, path="/o.md", content="o", actor=AGENT)
        await storage.delete_memory(store.id, other.id, expected_sha256=None, actor=AGENT)
        ids = [v.id for v in await all_versions(storage, store.id)]
        elsewhere = await storage.create_store(name="elsewhere", description="", metadata={})
        await storage.create_memory(elsewhere.id, path="/e.md", content="e", actor=AGENT)
        theirs = (await all_versions(storage, elsewhere.id))[0].id  # another store's: left out
        pairs = await SqlConsole(storage).version_changes(store.id, [*ids, "memver_nope", theirs])
        assert [pairs[version_id] for version_id in ids] == [
            ContentPair(None, ""),
            ContentPair("de", None),
            ContentPair("de", "de"),
            ContentPair("o", ""),
            ContentPair("", "o"),
        ]
        assert len(pairs) == 5
    finally:
        await storage.aclose()


WRITER = Actor("session_actor", "sesn_" + "mount7" * 6)
TIME = re.compile(
    r'<time datetime="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)" '
    r'title="(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC">([A-Z][a-z]{2} \d{1,2}, \d\d:\d\d)</time></a> '
    r'<span class="ago">just now</span>'
)
LINES = re.compile(r'<td class="lines">(.*?)</td>')
COUNT = re.compile(r">([+−][\d,]+)</span>")


async def test_history_rows_give_short_times_brief_writers_and_lines_changed(
    storage: Storage,
) -> None:
    store = await storage.create_store(name="Rows", description="", metadata={})
    s = store.id
    memory = await storage.create_memory(s, path="/n.md", content="a\nb\nc\n", actor=WRITER)
    await storage.update_memory(
        s, memory.id, content="a\nB\nc\nd\ne\n", path=None, expected_sha256=None, actor=WRITER
    )
    await storage.update_memory(s, memory.id, content=None, path="/m.md", expected_sha256=None,
                                actor=WRITER)  # fmt: skip
    await storage.delete_memory(s, memory.id, expected_sha256=None, actor=WRITER)
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        for url in (
            f"/console/stores/{s}/memories/{memory.id}/history",
            f"/console/stores/{s}/history",
        ):
            page = (await client.get(url)).text
            # newest first: deleted (every line gone), renamed, edited, created
            counts = [COUNT.findall(cell) for cell in LINES.findall(page)]
            assert counts == [["+0", "−5"], ["+0", "−0"], ["+3", "−1"], ["+3", "−0"]], url
            times = TIME.findall(page)
            assert len(times) == 4  # to the second: no microseconds
            versions = await all_versions(storage, s)
            assert {t[0] for t in times} == {
                v.created_at.strftime("%Y-%m-%dT%H:%M:%SZ") for v in versions
            }
            # a writer on one line: its kind and a short id, the whole id in its title, a link
            # to the store's history of its versions
            assert (
                page.count(
                    f'<a class="writer" href="/console/stores/{s}/history?session={WRITER.id}" '
                    f'title="session {WRITER.id}: its versions in this store">'
                    "session sesn_mount7mo…</a>"
                )
                == 4
            )


async def test_version_and_compare_pages_name_writers_as_the_history_does(
    storage: Storage,
) -> None:
    """One writer, one wording: the short form on one line, the whole id in its title; the
    signed-in key is "you"."""
    store = await storage.create_store(name="Writers", description="", metadata={})
    s = store.id
    memory = await storage.create_memory(s, path="/w.md", content="a\n", actor=WRITER)
    await storage.update_memory(
        s, memory.id, content="b\n", path=None, expected_sha256=None, actor=WRITER
    )
    older, newer = sorted(await all_versions(storage, s), key=lambda v: v.created_at)
    short = f'<span class="writer" title="session {WRITER.id}">session sesn_mount7mo…</span>'
    base = f"/console/stores/{s}/memories/{memory.id}"
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        version = (await client.get(f"{base}/versions/{older.id}")).text
        assert f"<dt>Written by</dt><dd>{short}</dd>" in version
        compare = (
            await client.get(f"{base}/history/compare", params={"from": older.id, "to": newer.id})
        ).text
        assert compare.count(short) == 2
        assert WRITER.id not in compare.replace(f'title="session {WRITER.id}"', "")


async def test_a_redacted_side_has_no_line_count(storage: Storage) -> None:
    store = await storage.create_store(name="Redacted", description="", metadata={})
    memory = await storage.create_memory(store.id, path="/r.md", content="x\n", actor=AGENT)
    await storage.update_memory(
        store.id, memory.id, content="y\n", path=None, expected_sha256=None, actor=AGENT
    )
    await storage.redact_version(store.id, (await all_versions(storage, store.id))[0].id,
                                 actor=AGENT)  # fmt: skip
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        page = (await client.get(f"/console/stores/{store.id}/history")).text
    assert LINES.findall(page) == ["–", "–"]  # neither the redacted one nor the one after it


def test_a_line_count_is_the_diff_tables_and_capped_on_hostile_contents() -> None:
    for old, new in [("a\nb\nc", "a\nB\nc\nd"), ("", "x\ny\n"), ("p\nq\n" * 30, "q\np\nr\n" * 20)]:
        rows = diff_table(old, new).unified
        table = LineCount(
            sum(row.kind == "add" for row in rows), sum(row.kind == "remove" for row in rows)
        )
        assert line_counts(old, new) == table
    # repeated lines take difflib cubic time (2,000 of them: a minute): past the cap, a count of
    # lines as multisets, in linear time
    old, new = "x\ny\n" * 1000, "y\nx\nz\n" * 700
    assert len(old.splitlines()) * len(new.splitlines()) > EXACT_COUNT_CELLS
    started = time.perf_counter()
    assert line_counts(old, new) == LineCount(700, 600)
    assert time.perf_counter() - started < 1.0
    # a long memory with a small edit still counts exactly (its common head and tail set aside)
    long = "".join(f"line {n}\n" for n in range(5000))
    assert line_counts(long, long.replace("line 2500\n", "line 2500!\nnew\n")) == LineCount(2, 1)


def test_the_diff_table_marks_words_only_where_it_is_cheap_and_junks_repeated_lines() -> None:
    """One line of 15,000 words against another kept difflib busy for minutes on the console's
    worker: past ``EXACT_DIFF_CELLS`` token pairs the pair is shown whole and unmarked, and past
    as many line pairs repeated lines stop being anchors (still a diff: every line shown once)."""
    old = " ".join(f"w{n % 7}" for n in range(15_000))
    new = " ".join(f"w{n % 5}" for n in range(15_000))
    rows = diff_table(old, new).unified
    assert [row.kind for row in rows] == ["hunk", "remove", "add"]
    assert rows[1].old.pieces == (Piece(old),) and rows[2].new.pieces == (Piece(new),)
    marked = diff_table("the cat sat", "the dog sat").unified
    assert any(piece.changed for piece in marked[1].old.pieces)  # a short pair: words marked
    old_lines = [f"same {n % 3}" for n in range(3000)]
    new_lines = [f"same {n % 4}" for n in range(3000)]
    assert len(old_lines) * len(new_lines) > EXACT_DIFF_CELLS
    table = diff_table("\n".join(old_lines), "\n".join(new_lines)).unified
    for side, lines in (("old", old_lines), ("new", new_lines)):
        shown = [getattr(row, side) for row in table if getattr(row, side).number is not None]
        numbers = [line.number for line in shown]
        assert numbers == sorted(set(numbers)) and numbers  # each line once, in order
        assert all("".join(p.text for p in line.pieces) == lines[line.number - 1] for line in shown)
