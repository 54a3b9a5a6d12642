"""The daemon gives freed memory back to the system (memfs.mount.memory) once the local
budget's usage has fallen, not while it grows or holds."""

from __future__ import annotations

import trio

from memfs.mount.memory import MemoryReturn


async def test_trims_once_usage_falls_by_the_threshold(autojump_clock: trio.abc.Clock) -> None:
    usage = [0]
    memory = MemoryReturn(lambda: usage[0], interval=1.0, threshold=100)
    async with trio.open_nursery() as nursery:
        await nursery.start(memory.run)
        for value in (50, 500, 450):  # grows, then falls by less than the threshold
            usage[0] = value
            await trio.sleep(1.5)
        assert memory.trims == 0
        usage[0] = 300  # 200 below the peak: files were removed
        await trio.sleep(1.5)
        assert memory.trims == 1
        await trio.sleep(5)  # nothing freed since
        assert memory.trims == 1
        nursery.cancel_scope.cancel()
