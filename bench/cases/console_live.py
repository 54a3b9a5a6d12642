"""Benchmark the console's live pages: what a change costs as more pages watch one store.

Starts a ``memfs server`` on a temporary SQLite database (``--max-streams-per-key`` raised so
one signed-in key may hold every viewer), signs in to the console over HTTP, and for each count
of viewers in ``--viewers`` opens that many live streams of one store (the store page's
endpoint, ``/console/live/stores/{id}``, as ``live.js`` does), then updates a memory of the
store ``--changes`` times through the API, one after another, each time waiting until every
viewer has its event. It reports, per count of viewers:
- the storage reads of the console's streams per change, once the pages are open
  (``memfs_server_change_stream_reads_total`` of ``console_memory_stores``, shared and own,
  from ``/metrics``: deterministic);
- the API write's time (the POST) and the time until the last viewer has the event, as the
  median over the changes and as a ratio to the same run's write with no viewer (so the ratios
  hold on a loaded machine).

Owns no product code.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.fixtures import server_on
from bench.harness import Case, Row

KEY = "sk-bench-live-" + "l" * 24
TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
READS = re.compile(
    r'memfs_server_change_stream_reads_total\{stream="console_memory_stores",'
    r'reader="(shared|own)"\} (\d+)'
)
API_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


async def reads(api: httpx.AsyncClient) -> int:
    text = (await api.get("/metrics")).text
    return sum(int(count) for _, count in READS.findall(text))


async def run_viewers(base_url: str, viewers: int, changes: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=viewers + 8, max_keepalive_connections=viewers + 8)
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as browser,
        httpx.AsyncClient(base_url=base_url, headers=API_HEADERS, timeout=60) as api,
    ):
        form = await browser.get("/console/sign-in")
        found = TOKEN.search(form.text)
        assert found is not None
        await browser.post("/console/sign-in", data={"csrf": found.group(1), "api_key": KEY})
        store = (await api.post("/v1/memory_stores", json={"name": f"live {viewers}"})).json()
        memories = f"/v1/memory_stores/{store['id']}/memories"
        memory = (await api.post(memories, json={"path": "/m.md", "content": "0"})).json()
        page = await browser.get(f"/console/stores/{store['id']}")
        src = re.search(r'data-src="([^"]+)"', page.text)
        assert src is not None, "the store page has no live element (no change hub?)"
        url = src.group(1).replace("&amp;", "&")
        received = [0] * viewers
        arrived = trio.Event()

        async def view(i: int, task_status: trio.TaskStatus[None]) -> None:
            nonlocal arrived
            async with browser.stream("GET", url) as stream:
                assert stream.status_code == 200, stream.status_code
                task_status.started()
                async for line in stream.aiter_lines():
                    if line.startswith("event: change"):
                        received[i] += 1
                        arrived.set()

        write_times: list[float] = []
        delivery_times: list[float] = []
        async with trio.open_nursery() as nursery:
            opened = await reads(api)
            for i in range(viewers):
                await nursery.start(view, i)
            # the first page's own catch-up read and the feed's first read are the opening's,
            # not the changes': wait for them before counting
            while viewers and await reads(api) < opened + 2:
                await trio.sleep(0.01)
            before = await reads(api)
            for n in range(1, changes + 1):
                started = time.perf_counter()
                answer = await api.post(f"{memories}/{memory['id']}", json={"content": str(n)})
                assert answer.status_code == 200, answer.text
                write_times.append(time.perf_counter() - started)
                while min(received, default=n) < n:
                    arrived = trio.Event()
                    await arrived.wait()
                delivery_times.append(time.perf_counter() - started)
            after = await reads(api)
            nursery.cancel_scope.cancel()
        return {
            "viewers": viewers,
            "reads_per_change": (after - before) / changes,
            "write_s": statistics.median(write_times),
            "delivered_s": statistics.median(delivery_times) if viewers else None,
        }


async def bench(base_url: str, viewer_counts: list[int], changes: int) -> list[Row]:
    rows = [await run_viewers(base_url, v, changes) for v in [0, *viewer_counts]]
    baseline = rows[0]["write_s"]
    for row in rows:
        row["write_ratio"] = row["write_s"] / baseline
        delivered = row["delivered_s"]
        row["delivered_ratio"] = None if delivered is None else delivered / baseline
    return rows


class ConsoleLiveCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--viewers", default="1,10,100", help="comma-separated viewer counts")
        parser.add_argument("--changes", type=int, default=30)

    def note(self, options: argparse.Namespace) -> str:
        return f"{options.changes} changes per row; times: medians, and x the write with no viewer"

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        counts = [int(v) for v in options.viewers.split(",")]
        with (
            tempfile.TemporaryDirectory() as tmp,
            server_on(
                Path(tmp) / "live.db", KEY, extra_args=["--max-streams-per-key", "1000"]
            ) as server,
        ):
            return trio.run(bench, server.base_url, counts, options.changes)


CASE = ConsoleLiveCase()
