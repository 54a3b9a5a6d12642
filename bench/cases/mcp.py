"""Benchmark ``memfs mcp``: how soon it answers ``initialize``, and what a tool call costs over
the API requests it makes.

1. Start-up: ``memfs mcp STORE`` spawned ``--runs`` times, as an agent's host does, driven by
   the official client over stdio: the wall time from spawn to the ``initialize`` answer and
   to the answer of the ``tools/list`` sent right after it, and the CPU time of the process
   (user + system, counted when it exits after stdin closes), next to ``memfs --version`` and
   ``python -c "import mcp"`` (the SDK's own import) measured in the same run. Goal (issue
   22): ready within 0.5 s on a quiet machine.
2. Tool calls, in process (the official client over memory streams, the JSON-RPC handshake of
   stdio): ``memory view`` of a file and ``memory str_replace`` on a store of 20 memories, each
   against the same requests made directly with the client (``find_memory`` + ``get_memory``,
   and + ``update_memory`` with the precondition); the requests each call made, counted by the
   client (deterministic). Goal: a tool call within 1.5x the requests it makes.
3. The same calls to ``memfs server``'s own MCP endpoint over streamable HTTP (the official
   client's transport), against the same REST requests alone: the requests column counts the
   endpoint's POSTs (the server's /metrics), one a call, the storage work behind it in-process.

All against a local ``memfs server`` (SQLite). Owns no product code.
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from bench.fixtures import bench_key, memfs_command, server_on
from bench.harness import Case, Row
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret

GOAL_READY_S = 0.5
CHECKOUT = Path(__file__).resolve().parents[2]  # the code measured: this checkout's memfs
GOAL_CALL_RATIO = 1.5


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cost(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``argv`` run to its end."""
    walls, cpus = [], []
    for _ in range(runs):
        before, started = cpu_of_children(), time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_of_children() - before)
    return statistics.median(walls), statistics.median(cpus)


async def ready_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawning ``memfs mcp`` to its ``initialize`` answer, and to its answer to
    the ``tools/list`` sent right after (the client's first request that needs the SDK)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    started = time.perf_counter()
    with open(os.devnull, "w") as errors:
        async with Client(stdio_client(params, errlog=errors), mode="legacy") as client:
            initialized = time.perf_counter() - started
            await client.list_tools()
            return initialized, time.perf_counter() - started


def startup(
    argv: list[str], envs: list[dict[str, str]], runs: int
) -> list[tuple[float, float, float]]:
    """Median wall seconds to ``initialize``'s answer and to the first ``tools/list``'s, and
    CPU seconds, for each of ``envs`` (each a side of a comparison: its own ``PYTHONPATH``),
    the sides alternated run after run."""
    walls: list[list[float]] = [[] for _ in envs]
    tools: list[list[float]] = [[] for _ in envs]
    cpus: list[list[float]] = [[] for _ in envs]
    for _ in range(runs):
        for side, env in enumerate(envs):
            before = cpu_of_children()
            initialized, listed = trio.run(ready_once, argv, env)
            walls[side].append(initialized)
            tools[side].append(listed)
            cpus[side].append(cpu_of_children() - before)  # it has exited: stdin closed
    return [
        (statistics.median(w), statistics.median(t), statistics.median(c))
        for w, t, c in zip(walls, tools, cpus, strict=True)
    ]


async def median_seconds(action: Callable[[], Awaitable[object]], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _mcp_route_requests(base_url: str) -> int:
    """POSTs the server answered on its Memory Stores MCP route so far (its /metrics)."""
    import httpx

    async with httpx.AsyncClient() as http:
        text = (await http.get(base_url + "/metrics")).text
    prefix = 'memfs_server_requests_total{method="POST",route="/v1/memory_stores/{store_id}/mcp"'
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


async def tool_calls(base_url: str, key: str, store_id: str, runs: int) -> list[Row]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from memfs.api.store import MemoryStoresAPI, memory_stores_capabilities
    from memfs.mcp.app import build_server
    from memfs.mcp.backend import StoreInfo
    from memfs.mcp.store_backend import StoreBackend

    config = ClientConfig(api_key=Secret(key), base_url=base_url)
    async with StoreClient(config) as direct, StoreClient(config) as served:
        capabilities = await memory_stores_capabilities(served)
        info = StoreInfo("memory-stores", "bench", False, True, False, True)
        backend = StoreBackend(MemoryStoresAPI(served, store_id, capabilities), info)
        path = "/notes/n7.md"
        upper = {"now": False}  # the file holds "NOTE" (else "note"); both edits flip it

        def swap() -> tuple[str, str]:
            old, new = ("NOTE", "note") if upper["now"] else ("note", "NOTE")
            upper["now"] = not upper["now"]
            return old, new

        async def direct_view() -> None:
            found = await direct.find_memory(store_id, path)
            assert found is not None
            await direct.get_memory(store_id, found.id)

        async def direct_edit() -> None:
            found = await direct.find_memory(store_id, path)
            assert found is not None
            memory = await direct.get_memory(store_id, found.id)
            old, new = swap()
            content = (memory.content or "").replace(old, new)
            await direct.update_memory(
                store_id, found.id, content=content, expected_sha256=memory.content_sha256
            )

        rows: list[dict[str, Any]] = []

        async def measure(client: Any, where: str, count: Callable[[], Awaitable[int]]) -> None:
            """Both calls through ``client`` against the requests alone; ``count()``: requests
            so far, of the kind this client makes (deterministic: counted, not timed)."""

            async def mcp_view() -> None:
                result = await client.call_tool(
                    "memory", {"command": "view", "path": "/memories" + path}
                )
                assert not result.is_error

            async def mcp_edit() -> None:
                old, new = swap()
                result = await client.call_tool(
                    "memory",
                    {"command": "str_replace", "path": "/memories" + path, "old_str": old,
                     "new_str": new},
                )  # fmt: skip
                assert not result.is_error, result

            for label, through_mcp, by_hand in (
                (f"`memory view` of a file{where}", mcp_view, direct_view),
                (f"`memory str_replace`{where}", mcp_edit, direct_edit),
            ):
                await by_hand()  # warm both connections
                await through_mcp()
                before = await count()
                await through_mcp()
                requests = await count() - before
                mcp_s = await median_seconds(through_mcp, runs)
                direct_s = await median_seconds(by_hand, runs)
                rows.append({"call": label, "requests": requests, "mcp_s": mcp_s,
                             "direct_s": direct_s, "ratio": mcp_s / direct_s})  # fmt: skip

        async def client_requests() -> int:
            return int(served.stats.snapshot()["total"])

        async with Client(build_server(backend), mode="legacy") as client:
            await measure(client, "", client_requests)

        # memfs server's own endpoint: one HTTP request a call, the server's storage behind it
        url = f"{base_url}/v1/memory_stores/{store_id}/mcp"
        http = create_mcp_http_client(headers={"x-api-key": key})

        async def mcp_posts() -> int:
            return await _mcp_route_requests(base_url)

        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            await measure(client, ", `memfs server` over HTTP", mcp_posts)
        return rows


class McpCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-n", "--runs", type=int, default=7, help="spawns of memfs mcp")
        parser.add_argument("--calls", type=int, default=50, help="tool calls of each kind")
        parser.add_argument(
            "--against", metavar="DIR", action="append", default=[],
            help="a checkout of memfs to compare start-up with (e.g. a worktree of the commit "
            "before; repeatable): all spawned alternately, each with its own code on PYTHONPATH",
        )  # fmt: skip
        parser.add_argument("--startup-only", action="store_true", help="skip the tool calls")

    def note(self, options: argparse.Namespace) -> str:
        return (
            f"start-up: median of {options.runs} spawns, goal {GOAL_READY_S} s; tool calls: "
            f"median of {options.calls}, goal {GOAL_CALL_RATIO}x the requests alone"
        )

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        memfs = memfs_command()
        key = bench_key()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMFS_"))}
        with (
            tempfile.TemporaryDirectory(prefix="memfs-bench-mcp-") as tmp,
            server_on(Path(tmp) / "bench.db", key) as server,
        ):
            base_url = server.base_url
            client_env = dict(env, ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=base_url)

            async def fill() -> str:
                config = ClientConfig(api_key=Secret(key), base_url=base_url)
                async with StoreClient(config) as client:
                    store = await client.create_store(f"bench-{secrets.token_hex(4)}")
                    for n in range(20):
                        await client.create_memory(store.id, f"/notes/n{n}.md", f"note {n}\n")
                    return store.id

            store_id = trio.run(fill)
            sides = [(f"the same, code of {other}", other) for other in options.against]
            sides.append(("`memfs mcp STORE` to its initialize answer", str(CHECKOUT)))
            envs = [dict(client_env, PYTHONPATH=root) for _, root in sides]
            ready = startup([*memfs, "mcp", store_id], envs, options.runs)
            version_wall, version_cpu = process_cost([*memfs, "--version"], env, options.runs)
            sdk_wall, sdk_cpu = process_cost(
                [sys.executable, "-c", "import mcp"], env, options.runs
            )
            calls = []
            if not options.startup_only:
                calls = trio.run(tool_calls, base_url, key, store_id, options.calls)
        rows: list[Row] = [
            {"start-up": what, "wall_s": wall, "tools_list_s": listed, "cpu_s": cpu}
            for (what, _), (wall, listed, cpu) in zip(sides, ready, strict=True)
        ]
        rows.append({"start-up": "`memfs --version`", "wall_s": version_wall,
                     "tools_list_s": None, "cpu_s": version_cpu})  # fmt: skip
        rows.append({"start-up": "`python -c 'import mcp'` (the SDK's import)",
                     "wall_s": sdk_wall, "tools_list_s": None, "cpu_s": sdk_cpu})  # fmt: skip
        after = rows[len(options.against)]
        for before, other in zip(rows, options.against, strict=False):
            ratios = {k: float(after[f"{k}_s"] or 0) / float(before[f"{k}_s"] or 1)
                      for k in ("wall", "tools_list", "cpu")}  # fmt: skip
            rows.append({"this checkout / other": other, **ratios})
        return rows + calls


CASE = McpCase()
