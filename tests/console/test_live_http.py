"""The console's live endpoint over plain HTTP against a real ``memfs server``: it refuses
a request without a session cookie, from another site, or with a bad position; it streams a
change to every page watching it; and however many pages watch a store, a change costs one
storage read (the fan-out), and a change a page does not show sends it no event; a key's
pages hold a bounded number of streams, apart from its API streams, released when a page
goes."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from kit.servers import ServerProcess, free_port
from kit.waiting import wait_until
from memfs.server.console.pages.history import PAGE_SIZE

TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
READS = re.compile(
    r'memfs_server_change_stream_reads_total\{stream="console_memory_stores",'
    r'reader="(shared|own)"\} (\d+)'
)
VIEWERS = 3


async def sign_in(client: httpx.AsyncClient, key: str) -> None:
    form = await client.get("/console/sign-in")
    found = TOKEN.search(form.text)
    assert found is not None, form.text
    signed = await client.post("/console/sign-in", data={"csrf": found.group(1), "api_key": key})
    assert signed.status_code == 303, signed.text


@pytest.fixture
async def browser(console_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A signed-in client that keeps cookies, as a browser does."""
    async with httpx.AsyncClient(base_url=console_server.base_url, timeout=15) as client:
        await sign_in(client, console_server.api_key)
        yield client


@pytest.fixture
async def api(console_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"x-api-key": console_server.api_key, "anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient(
        base_url=console_server.base_url, headers=headers, timeout=15
    ) as client:
        yield client


async def new_store(api: httpx.AsyncClient) -> str:
    made = await api.post("/v1/memory_stores", json={"name": "live"})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


async def reads(api: httpx.AsyncClient) -> dict[str, int]:
    text = (await api.get("/metrics")).text
    return {reader: int(count) for reader, count in READS.findall(text)}


async def test_the_live_endpoint_refuses_strangers(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, console_server: ServerProcess
) -> None:
    store_id = await new_store(api)
    url = f"/console/live/stores/{store_id}?after=0"
    async with httpx.AsyncClient(base_url=console_server.base_url) as stranger:
        refused = await stranger.get(url)
        assert refused.status_code == 401 and "Sign in" in refused.text
        # an API key is no console session
        keyed = await stranger.get(url, headers={"x-api-key": console_server.api_key})
        assert keyed.status_code == 401
    for headers in ({"sec-fetch-site": "cross-site"}, {"origin": "http://evil.test"}):
        cross = await browser.get(url, headers=headers)
        assert cross.status_code == 403, headers
    assert (await browser.get(url.replace("after=0", "after=x"))).status_code == 400
    assert (await browser.get("/console/live/stores/memstore_nope?after=0")).status_code == 404
    dbx = await browser.get("/console/live/databricks/no-such-store?after=0")
    assert dbx.status_code == 404
    assert "content-security-policy" in refused.headers


async def test_history_pages_are_live_on_their_first_page(
    browser: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    """A memory's history and the store's reload at a change (their first page: an older one,
    or one a "To" ended, does not change), and the memory's watches that memory only."""
    store_id = await new_store(api)
    memories = f"/v1/memory_stores/{store_id}/memories"
    made = (await api.post(memories, json={"path": "/h.md", "content": "0"})).json()
    for n in range(1, PAGE_SIZE + 2):  # more than a page of versions
        await api.post(f"{memories}/{made['id']}", json={"content": str(n)})
    base = f"/console/stores/{store_id}"

    def live_of(page: httpx.Response) -> tuple[str, str] | None:
        assert page.status_code == 200, page.text
        found = re.search(r'id="live" hidden data-src="([^"]+)" data-mode="(\w+)"', page.text)
        return None if found is None else (found.group(1).replace("&amp;", "&"), found.group(2))

    memory_live = live_of(await browser.get(f"{base}/memories/{made['id']}/history"))
    assert memory_live is not None and memory_live[1] == "reload"
    assert f"item={made['id']}" in memory_live[0]
    store_live = live_of(await browser.get(f"{base}/history"))
    assert store_live is not None and store_live[1] == "reload" and "item=" not in store_live[0]
    assert live_of(await browser.get(f"{base}/history", params={"session": "x"})) is not None
    assert live_of(await browser.get(f"{base}/history", params={"to": "2020-01-01"})) is None
    first = await browser.get(f"{base}/memories/{made['id']}/history")
    older = re.search(r'href="([^"]+\?before=\d+)">Older versions', first.text)
    assert older is not None
    assert live_of(await browser.get(older.group(1).replace("&amp;", "&"))) is None
    # the memory's history learns of its memory's next version, through the page's stream
    seen: list[str] = []

    async def view(task_status: trio.TaskStatus[None]) -> None:
        headers = {"sec-fetch-site": "same-origin"}
        async with browser.stream("GET", memory_live[0], headers=headers) as got:
            assert got.status_code == 200
            task_status.started()
            async for line in got.aiter_lines():
                if line.startswith("data: "):
                    seen.append(line)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(view)
            await api.post(memories, json={"path": "/other.md", "content": "o"})
            await api.post(f"{memories}/{made['id']}", json={"content": "last"})
            await wait_until(lambda: seen)
            assert seen == ['data: {"what": "/h.md was modified", "gone": false}']
            nursery.cancel_scope.cancel()


async def test_many_pages_one_read_per_change(
    browser: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    store_id = await new_store(api)
    memories = f"/v1/memory_stores/{store_id}/memories"
    watched = (await api.post(memories, json={"path": "/w.md", "content": "w"})).json()
    head = await api.get(f"/v1/memory_stores/{store_id}/memory_versions", params={"limit": 1})
    after = head.json()["data"][0]["created_at"]
    page = await browser.get(f"/console/stores/{store_id}/memories/{watched['id']}")
    src = re.search(r'data-src="([^"]+)"', page.text)
    assert src is not None and after
    memory_url = src.group(1).replace("&amp;", "&")
    store_url = memory_url.split("&item=")[0]
    before = await reads(api)
    seen: dict[int, list[str]] = {i: [] for i in range(VIEWERS + 1)}

    async def view(i: int, url: str, task_status: trio.TaskStatus[None]) -> None:
        async with browser.stream("GET", url, headers={"sec-fetch-site": "same-origin"}) as got:
            assert got.status_code == 200
            assert got.headers["content-type"].startswith("text/event-stream")
            started = False
            async for line in got.aiter_lines():
                if not started:
                    started = True
                    task_status.started()
                if line.startswith("data: "):
                    seen[i].append(line)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for i in range(VIEWERS):  # the store's pages
                await nursery.start(view, i, store_url)
            await nursery.start(view, VIEWERS, memory_url)  # the memory's page
            # the first page caught up on its own and made the store's shared reader (the
            # others joined it where they start: the page's position, no read of their own)
            await wait_until(lambda: _settled(api, before, own=1, shared=1))
            settled = await reads(api)
            await api.post(memories, json={"path": "/other.md", "content": "o"})
            await wait_until(lambda: all(seen[i] for i in range(VIEWERS)))
            assert all('"/other.md was created"' in seen[i][0] for i in range(VIEWERS))
            changed = await reads(api)
            assert changed["shared"] - settled["shared"] == 1  # one read for every page
            assert changed["own"] == settled["own"]
            await api.post(f"{memories}/{watched['id']}", json={"content": "w2"})
            await wait_until(lambda: seen[VIEWERS])
            # the memory's page had no event for the other memory: its first is its own
            assert seen[VIEWERS] == ['data: {"what": "/w.md was modified", "gone": false}']
            nursery.cancel_scope.cancel()


async def _settled(
    api: httpx.AsyncClient, before: dict[str, int], *, own: int, shared: int
) -> bool:
    now = await reads(api)
    return now["own"] - before["own"] >= own and now["shared"] - before["shared"] >= shared


async def test_streams_are_bounded_apart_from_the_api_and_released_when_the_page_goes(
    tmp_path: Path,
) -> None:
    limit = ["--max-streams-per-key", "2"]
    with ServerProcess(tmp_path / "bounded.db", free_port(), extra_args=limit) as server:
        headers = {"x-api-key": server.api_key, "anthropic-version": "2023-06-01"}
        async with (
            httpx.AsyncClient(base_url=server.base_url, timeout=15) as browser,
            httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=15) as api,
        ):
            await sign_in(browser, server.api_key)
            url = f"/console/live/stores/{await new_store(api)}?after=0"
            api_stream = url.replace("/console/live/stores/", "/v1/memory_stores/")
            api_stream = api_stream.split("?")[0] + "/memfs/changes"

            async def hold(url: str, client: httpx.AsyncClient, task_status: Any) -> None:
                async with client.stream("GET", url) as got:
                    assert got.status_code == 200
                    task_status.started()
                    async for _ in got.aiter_lines():
                        pass

            async with trio.open_nursery() as pages:
                await pages.start(hold, url, browser)
                await pages.start(hold, url, browser)
                third = await browser.get(url)
                assert third.status_code == 429  # the key's console streams are bounded
                async with trio.open_nursery() as streams:  # its API streams are not taken
                    await streams.start(hold, api_stream, api)
                    streams.cancel_scope.cancel()
                pages.cancel_scope.cancel()  # the pages go

            async def opens() -> bool:
                async with browser.stream("GET", url) as got:
                    return got.status_code == 200

            # their subscriptions are released as their connections close
            await wait_until(opens)
            async with trio.open_nursery() as pages:
                await pages.start(hold, url, browser)
                await pages.start(hold, url, browser)
                pages.cancel_scope.cancel()
