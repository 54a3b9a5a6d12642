"""The daemon gives freed memory back to the system (memfs.mount.memory) once the local
budget's usage has fallen, not while it grows or holds."""

from __future__ import annotations

import trio

from memfs.mount.memory import MemoryReturn


async def test_trims_when_usage_falls(autojump_clock: trio.abc.Clock) -> None:
    usage = [50]
    memory = MemoryReturn(lambda: usage[0], interval=1.0, threshold=100)
    async with trio.open_nursery() as nursery:
        await nursery.start(memory.run)  # it looks at t = 1, 2, 3...
        await trio.sleep(0.5)
        usage[0] = 500  # grows
        await trio.sleep(1)
        usage[0] = 450  # falls by less than the threshold: it may go on falling
        await trio.sleep(1)
        assert memory.trims == 0
        await trio.sleep(1)  # it stopped falling: the rest of a removal
        assert memory.trims == 1
        usage[0] = 100  # falls by more than the threshold
        await trio.sleep(1)
        assert memory.trims == 2
        await trio.sleep(3)  # nothing freed since
        assert memory.trims == 2
        nursery.cancel_scope.cancel()


async def test_trims_when_the_caches_released_enough(autojump_clock: trio.abc.Clock) -> None:
    # a busy mount's caches replace and evict contents while their total holds: the freed
    # holes are given back once the caches released ``threshold`` bytes since the last trim
    released = [0]
    memory = MemoryReturn(lambda: 0, released=lambda: released[0], interval=1.0, threshold=100)
    async with trio.open_nursery() as nursery:
        await nursery.start(memory.run)  # it looks at t = 1, 2, 3...
        await trio.sleep(0.5)
        released[0] = 60
        await trio.sleep(1)
        assert memory.trims == 0  # not enough yet
        released[0] = 120
        await trio.sleep(1)
        assert memory.trims == 1
        released[0] = 200  # 80 since that trim
        await trio.sleep(2)
        assert memory.trims == 1
        released[0] = 220
        await trio.sleep(1)
        assert memory.trims == 2
        nursery.cancel_scope.cancel()
