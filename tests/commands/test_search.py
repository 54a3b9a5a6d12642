"""``memfs search STORE QUERY``: as a user runs it (a subprocess on the real server, which
ranks), and the choice of who ranks on a server without search (the hosted API, played by the
real server behind ``HostedLikeTransport``): a copy fetched now, said on stderr. The mount's
``.search/`` path is in tests/mount/test_search.py."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kit.hosted_like import HostedLikeTransport, hosted_like_client
from memfs.api import StoreClient
from memfs.api.store import MemoryStoresAPI
from memfs.commands.search import search_store

EXIT_USAGE, EXIT_NOT_FOUND = 2, 3

MEMORIES = {
    "/notes/garden.md": "# Garden\nplant tomatoes in May\ntomatoes need sun and water\n",
    "/notes/cooking.md": "# Recipes\npasta with tomato sauce\n",
    "/work/todo.md": "write the report\n",
}


def memfs(server: Any, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        env=server.client_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    for key in server.keys:
        assert key not in out.stdout and key not in out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == expect, (out.returncode, out.stdout, out.stderr)
    return out


@pytest.fixture
def store(sdk: Any) -> str:
    stores = sdk.beta.memory_stores
    created = stores.create(name=f"search-{uuid.uuid4().hex[:8]}")
    for path, content in MEMORIES.items():
        stores.memories.create(created.id, path=path, content=content)
    return str(created.id)


def test_search_command(server: Any, store: str) -> None:
    out = memfs(server, "search", store, "tomatoes sun")
    assert out.stderr == ""  # the server ranked (a local search says so on stderr)
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert [row[0] for row in rows] == ["/notes/garden.md", "/notes/cooking.md"]
    assert [row[3] for row in rows] == ["tomatoes need sun and water", "pasta with tomato sauce"]
    assert rows[0][1] == "100"  # relevance: a percentage of the best's score
    assert 1 <= int(rows[1][1]) < 100

    hits = json.loads(memfs(server, "search", store, "report", "--json").stdout)
    assert [(h["path"], h["line"]) for h in hits] == [("/work/todo.md", "write the report")]
    assert hits[0]["memory_id"].startswith("mem")
    assert set(hits[0]) == {"path", "relevance", "score", "description", "memory_id", "line"}
    assert hits[0]["relevance"] == 100 and hits[0]["score"] > 0
    hits = json.loads(memfs(server, "search", store, "tomatoes sun", "--json").stdout)
    assert [h["relevance"] for h in hits] == [int(row[1]) for row in rows]
    assert hits[1]["relevance"] == max(1, round(100 * hits[1]["score"] / hits[0]["score"]))

    assert len(memfs(server, "search", store, "tomato", "--limit", "1").stdout.splitlines()) == 1
    assert memfs(server, "search", store, "zucchini").stdout == ""  # nothing: exit 0

    out = memfs(server, "search", store, " ?! ", expect=EXIT_USAGE)
    assert out.stderr == "memfs: the query has no word to look for\n"
    out = memfs(server, "search", "no-such-store-here", "x", expect=EXIT_NOT_FOUND)
    assert out.stderr.startswith("memfs: ") and out.stderr.count("\n") == 1
    out = memfs(server, "search", store, "x", "--limit", "0", expect=EXIT_USAGE)
    assert "must be from 1 to 100" in out.stderr


def test_help_and_completion(server: Any) -> None:
    text = " ".join(memfs(server, "search", "--help").stdout.split())
    assert "tab" in text
    assert "Relevance: 100 for the best match" in text  # what the second column means
    assert "it compares the results of one search, not two searches" in text
    mount_help = " ".join(memfs(server, "mount", "--help").stdout.split())
    assert "relevance 1-100 with 100 the best" in mount_help
    assert "search" in memfs(server, "--help").stdout
    assert "--limit" in memfs(server, "completion", "bash").stdout


@pytest.fixture
async def hosted_like(server: Any) -> AsyncIterator[tuple[StoreClient, HostedLikeTransport]]:
    async with hosted_like_client(server) as pair:
        yield pair


async def test_without_server_search_a_copy_is_fetched(
    hosted_like: tuple[StoreClient, HostedLikeTransport], store: str, capsys: Any
) -> None:
    client, transport = hosted_like
    hits = await search_store(MemoryStoresAPI(client, store), "tomatoes sun", 10)
    assert [hit.path for hit in hits] == ["/notes/garden.md", "/notes/cooking.md"]
    assert hits[0].line == "tomatoes need sun and water"
    assert transport.capability_checks == 1
    assert "POST /v1/memory_stores/{store}/memfs/search" not in client.stats.snapshot()["by_route"]
    assert capsys.readouterr().err == (
        "memfs search: the server has no search; fetched the store (3 memories) and searched "
        "it here\n"
    )
