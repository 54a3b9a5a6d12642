"""statfs on a slow server: the first count is waited for at most ``wait`` seconds, then goes on
in the background; what it has seen so far is answered meanwhile, the whole count after."""

from __future__ import annotations

import uuid

import trio

from kit.waiting import wait_until
from memfs.api import StoreClient
from memfs.api.config import ClientConfig, Secret
from memfs.api.store import MemoryStoresAPI
from memfs.core.fetch.usage import StoreUsage

from .helpers import FaultyServer

MEMORIES = 250  # three listing pages of 100


async def test_first_statfs_does_not_wait_for_a_slow_count(faulty_server: FaultyServer) -> None:
    config = ClientConfig(api_key=Secret(faulty_server.api_key), base_url=faulty_server.base_url)
    async with StoreClient(config) as client:
        store = await client.create_store(f"usage-{uuid.uuid4().hex[:8]}")
        for n in range(MEMORIES):
            await client.create_memory(store.id, f"/m{n:03}.md", "x" * 10)
        faulty_server.set_faults("latency=0.4")
        usage = StoreUsage(MemoryStoresAPI(client, store.id), lambda: True, wait=0.5)
        async with trio.open_nursery() as nursery:
            usage.nursery = nursery
            with trio.fail_after(5):
                started = trio.current_time()
                count, used = await usage.figures()
                assert trio.current_time() - started < 1.0  # not the whole 3-page count
                assert count < MEMORIES and used == count * 10  # what it saw so far
                await wait_until(lambda: usage.counts > 0)  # the count finishes behind it
            faulty_server.set_faults("none")
            client.stats.reset()
            assert await usage.figures() == (MEMORIES, MEMORIES * 10)
            assert client.stats.total == 0 and usage.counts == 1
