"""``MOUNTPOINT/.search/<query>`` through a real mount on the real server: ranked results, one
a line (path, relevance, description, best line; tab-separated), never listed, read-only, fresh
after a write. ``--search local`` makes the mount search its own copy of the store, as it does
on a server without search (the hosted API)."""

from __future__ import annotations

import errno
import os
import stat
import subprocess

import pytest

from kit.hosted_like import hosted_like_client
from kit.mounts import memfs
from kit.waiting import wait_for
from memfs.api.search import SEARCH
from memfs.api.store import MemoryStoresAPI
from memfs.commands.search import search_store

pytestmark = pytest.mark.fuse

SEARCH_ROUTE = f"POST {SEARCH}"


def expect_errno(number, func, *args, **kwargs):
    with pytest.raises(OSError) as info:
        func(*args, **kwargs)
    assert info.value.errno == number, (
        f"{errno.errorcode[info.value.errno]} != {errno.errorcode[number]}"
    )


def rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


MEMORIES = {
    "/notes/garden.md": "# Garden\nplant tomatoes in May\ntomatoes need sun and water\n",
    "/notes/cooking.md": "# Recipes\npasta with tomato sauce\n",
    "/work/todo.md": "write the report\n",
}


def test_results_hidden_and_read_only(mount_factory):
    m = mount_factory("--search", "local", memories=MEMORIES)
    search = m.path / ".search"
    result = rows((search / "tomatoes sun").read_text())
    assert [row[0] for row in result] == ["/notes/garden.md", "/notes/cooking.md"]
    assert all(len(row) == 4 for row in result)
    assert float(result[0][1]) > float(result[1][1])
    assert result[0][3] == "tomatoes need sun and water"  # the line holding both words
    assert result[1][3] == "pasta with tomato sauce"
    assert (search / "nothing matches this").read_text() == ""
    # a word in most memories: the local index's BM25 gives it its floor (1e-06), shown as a
    # percentage of the best hit's score
    result = rows((search / "tomato").read_text())
    assert [row[0] for row in result] == ["/notes/garden.md", "/notes/cooking.md"]
    assert [row[1] for row in result] == ["100", result[1][1]]
    assert 1 <= int(result[1][1]) <= 100
    # what cut and awk see, as the documentation says
    cut = subprocess.run(
        ["cut", "-f1", str(search / "report")], capture_output=True, text=True, check=True
    )
    assert cut.stdout == "/work/todo.md\n"

    # never listed: not in the root, nothing in the directory, not walked
    assert ".search" not in os.listdir(m.path)
    assert os.listdir(search) == []
    found = subprocess.run(["find", str(m.path)], capture_output=True, text=True, check=True)
    assert ".search" not in found.stdout
    assert stat.S_ISDIR(os.stat(search).st_mode)
    assert stat.S_IMODE(os.stat(search / "x").st_mode) == 0o444

    # read-only everywhere
    expect_errno(errno.EROFS, (search / "x").write_text, "y")
    expect_errno(errno.EROFS, os.open, search / "tomatoes", os.O_RDWR)
    expect_errno(errno.EEXIST, os.mkdir, search / "d")  # every name there exists: a query
    expect_errno(errno.EROFS, os.unlink, search / "tomatoes")
    expect_errno(errno.EROFS, os.rename, m.path / "work" / "todo.md", search / "todo.md")
    expect_errno(errno.EROFS, os.truncate, search / "tomatoes", 0)
    expect_errno(errno.EEXIST, os.mkdir, m.path / ".search")
    expect_errno(errno.ENOTDIR, os.stat, search / "tomatoes" / "x")
    assert m.paths() == set(MEMORIES)


def test_fresh_after_a_write_and_a_remote_change(mount_factory):
    m = mount_factory("--search", "local", memories=MEMORIES)
    query = m.path / ".search" / "zucchini"
    assert query.read_text() == ""
    with open(query) as before:  # open before the write: its results were taken at open
        (m.path / "notes" / "new.md").write_text("zucchini everywhere\n")
        assert before.read() == ""
        assert [r[0] for r in rows(query.read_text())] == ["/notes/new.md"]  # a new open
    m.put("/remote.md", "a zucchini from elsewhere")
    (m.path / "notes" / "new.md").unlink()
    (m.path / "notes" / "garden.md").write_text("zucchini only now\n")
    assert sorted(r[0] for r in rows(query.read_text())) == ["/notes/garden.md", "/remote.md"]
    assert [r[0] for r in rows((m.path / ".search" / "tomatoes").read_text())] == [
        "/notes/cooking.md"
    ]
    status = wait_for(lambda: (d := m.status())["search"]["local_documents"] > 0 and d)
    assert status["search"] == {"by": "local index", "local_documents": len(MEMORIES) + 1}
    text = memfs("status", str(m.path), env=m.env).stdout
    assert f"search           a local index ({len(MEMORIES) + 1} memories)\n" in text


def test_the_server_ranks_when_it_offers_search(mount_factory):
    m = mount_factory(memories=MEMORIES)  # --search auto
    assert m.status()["search"]["by"] == "undecided"
    (m.path / "notes" / "new.md").write_text("tomatoes and zucchini\n")  # pending: not uploaded
    result = rows((m.path / ".search" / "zucchini").read_text())
    assert result == [["/notes/new.md", result[0][1], "", "tomatoes and zucchini"]]
    assert float(result[0][1]) > 0
    result = rows((m.path / ".search" / "tomatoes sun").read_text())
    assert [row[0] for row in result][:1] == ["/notes/garden.md"]
    assert {row[0] for row in result} == {"/notes/garden.md", "/notes/cooking.md", "/notes/new.md"}

    def routes():
        return m.status()["requests"]["by_route"]

    wait_for(lambda: routes().get(SEARCH_ROUTE) == 2)
    assert m.status()["search"] == {"by": "server", "local_documents": 0}
    # nothing fetched for a local index: no listing with contents of the whole store
    assert routes().get("GET /v1/memory_stores/{store}/memory_versions", 0) == 0


async def test_memfs_search_reads_a_mount_on_a_server_without_search(server, mount_factory, capsys):
    """``memfs search`` on a server without search: a mount of the store answers (its pending
    writes included); a limit above what a ``.search/`` file holds fetches a copy instead."""
    m = mount_factory("--search", "local", memories=MEMORIES)
    (m.path / "work" / "plan.md").write_text("the report is due\n")  # pending: not uploaded
    async with hosted_like_client(server) as (client, _):
        store = MemoryStoresAPI(client, m.store_id)
        hits = await search_store(store, "report", 10)
        assert sorted(hit.path for hit in hits) == ["/work/plan.md", "/work/todo.md"]
        assert capsys.readouterr().err == (
            f"memfs search: the server has no search; searched by the mount at {m.path}\n"
        )
        hits = await search_store(store, "report", 11)
        assert len(hits) == 2
        assert "fetched the store (4 memories)" in capsys.readouterr().err
