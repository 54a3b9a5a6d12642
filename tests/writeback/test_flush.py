"""Write-back queue: a flush that meets a run claimed but still waiting for its turn."""

from __future__ import annotations

from collections.abc import Hashable

import trio
import trio.testing

from memfs.writeback.queue import WriteBack


async def test_flush_of_a_claimed_key_returns_when_its_run_ends(autojump_clock: object) -> None:
    done: list[Hashable] = []

    async def upload(key: Hashable) -> None:
        await trio.sleep(1)  # an upload that takes a (virtual: autojump clock) second
        done.append(key)

    queued: list[Hashable] = []
    finished: list[tuple[Hashable, BaseException | None]] = []
    queue = WriteBack(
        upload,
        concurrency=1,
        on_queued=queued.append,
        on_done=lambda key, exc: finished.append((key, exc)),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(queue.run)
        queue.schedule("a", 0)
        queue.schedule("b", 0)
        await trio.testing.wait_all_tasks_blocked()  # both claimed; "b" waits for the limiter
        assert queue.running("a") and queue.running("b") and done == []
        with trio.fail_after(10):
            await queue.flush("b")
        assert "b" in done and ("b", None) in finished
        await queue.flush("a")
        assert sorted(done) == ["a", "b"] and queued == ["a", "b"]
        queue.schedule("c", 5)
        queue.cancel("c")
        assert finished[-1] == ("c", None) and not queue.pending("c")
        nursery.cancel_scope.cancel()
