"""The write-back queue alone: a fake upload function the test controls, trio's autojump clock.

Every ``trio.sleep`` here is a step of the scenario in virtual time (the clock jumps when all
tasks wait), so a loaded machine cannot stretch it.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import pytest
import trio
import trio.testing

from memfs.contract.errors import ApiConnectionError, PreconditionFailedError, RateLimitError
from memfs.contract.retry import RetryPolicy, is_transient
from memfs.writeback.queue import WriteBack


class Fraction:
    """A random source that always draws the same fraction of the range (exact jitter)."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction
        self.draws: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.draws.append((a, b))
        return a + (b - a) * self.fraction


def policy(fraction: float = 1.0) -> RetryPolicy:
    """The queue's production settings with a fixed draw (1.0: the full ceiling)."""
    return RetryPolicy(base_delay=0.5, max_delay=30.0, rng=Fraction(fraction))


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Hashable, float]] = []
        self.fail: dict[Hashable, list[BaseException]] = {}
        self.failures: list[tuple[Hashable, BaseException]] = []

    async def upload(self, key: Hashable) -> None:
        self.calls.append((key, trio.current_time()))
        errors = self.fail.get(key)
        if errors:
            raise errors.pop(0)

    def on_failure(self, key: Hashable, exc: BaseException) -> None:
        self.failures.append((key, exc))


@pytest.fixture
def clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


async def start(rec: Recorder, nursery: trio.Nursery) -> WriteBack:
    wb = WriteBack(rec.upload, is_transient=is_transient, on_failure=rec.on_failure, retry=policy())
    await nursery.start(wb.run)
    return wb


async def test_runs_when_due_and_collapses_repeated_saves(clock):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        t0 = trio.current_time()
        wb.schedule("a", 1.0)
        await trio.sleep(0.5)
        wb.schedule("a", 1.0)  # collapses: the earlier due time is kept
        await trio.sleep(2)
        assert [k for k, _ in rec.calls] == ["a"]
        assert rec.calls[0][1] == pytest.approx(t0 + 1.0)
        assert not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_debounce_waits_until_left_alone(clock):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        t0 = trio.current_time()
        wb.schedule("new", 1.0, debounce=True)
        await trio.sleep(0.8)
        wb.schedule("new", 1.0, debounce=True)
        await trio.sleep(3)
        assert rec.calls == [("new", pytest.approx(t0 + 1.8))]
        nursery.cancel_scope.cancel()


async def test_cancel_forgets(clock):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        wb.schedule("tmp", 1.0)
        wb.cancel("tmp")
        await trio.sleep(3)
        assert rec.calls == []
        nursery.cancel_scope.cancel()


async def test_transient_errors_retry_with_backoff(clock):
    rec = Recorder()
    rec.fail["a"] = [ApiConnectionError("down"), ApiConnectionError("down")]
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        wb.schedule("a", 0)
        await trio.sleep(10)
        times = [t for _, t in rec.calls]
        assert len(times) == 3
        assert times[2] - times[1] > times[1] - times[0]  # backoff grows
        assert not wb.pending("a") and rec.failures == []
        nursery.cancel_scope.cancel()


async def test_permanent_error_goes_to_on_failure(clock):
    rec = Recorder()
    error = PreconditionFailedError("changed")
    rec.fail["a"] = [error]
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        wb.schedule("a", 0)
        await trio.sleep(5)
        assert rec.failures == [("a", error)]
        assert len(rec.calls) == 1 and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_flush_runs_now_and_raises(clock):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        t0 = trio.current_time()
        wb.schedule("a", 30)
        await wb.flush("a")
        assert rec.calls == [("a", t0)]
        rec.fail["b"] = [ApiConnectionError("down")]
        wb.schedule("b", 30)
        with pytest.raises(ApiConnectionError):
            await wb.flush("b")
        assert wb.pending("b")  # transient: still queued for retry
        await wb.flush("missing")  # nothing pending: returns at once
        nursery.cancel_scope.cancel()


async def test_schedule_while_running_runs_again(clock):
    started = trio.Event()
    release = trio.Event()
    calls: list[str] = []

    async def upload(key: Hashable) -> None:
        calls.append(str(key))
        if len(calls) == 1:
            started.set()
            await release.wait()

    async with trio.open_nursery() as nursery:
        wb = WriteBack(upload)
        await nursery.start(wb.run)
        wb.schedule("a", 0)
        await started.wait()
        wb.schedule("a", 0.5)  # a save while the upload runs
        release.set()
        await trio.sleep(2)
        assert calls == ["a", "a"]
        nursery.cancel_scope.cancel()


async def test_flush_all(clock):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        for key in "abc":
            wb.schedule(key, 60)
        rec.fail["c"] = [ApiConnectionError("down"), ApiConnectionError("down")]
        errors = await wb.flush_all()
        assert sorted(k for k, _ in rec.calls) == ["a", "b", "c"]
        assert len(errors) == 1 and isinstance(errors[0], ApiConnectionError)
        assert wb.keys() == ["c"]
        nursery.cancel_scope.cancel()


async def test_flush_with_patience_retries_transient_failures_until_done(clock):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        rec.fail["a"] = [ApiConnectionError("down")] * 5
        wb.schedule("a", 60)
        t0 = trio.current_time()
        await wb.flush("a", patience=30)
        assert len(rec.calls) == 6 and not wb.pending("a")
        gaps = [b - a for (_, a), (_, b) in zip(rec.calls, rec.calls[1:], strict=False)]
        assert gaps == [0.5, 1.0, 2.0, 4.0, 8.0]  # the queue's backoff between tries
        assert trio.current_time() - t0 == pytest.approx(15.5)
        nursery.cancel_scope.cancel()


async def test_flush_with_patience_gives_up_in_time_and_keeps_the_work(clock):
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        rec.fail["a"] = [ApiConnectionError("down")] * 100
        wb.schedule("a", 60)
        t0 = trio.current_time()
        with pytest.raises(ApiConnectionError):
            await wb.flush("a", patience=10)
        assert trio.current_time() - t0 == pytest.approx(10)
        assert wb.pending("a")  # still queued: the background keeps retrying
        calls = len(rec.calls)
        await trio.sleep(120)
        assert len(rec.calls) > calls and wb.pending("a")  # retried, never given up
        assert rec.failures == []
        nursery.cancel_scope.cancel()


async def test_flush_deadline_mid_run_leaves_the_work_queued(clock):
    calls: list[float] = []

    async def upload(key: Hashable) -> None:
        calls.append(trio.current_time())
        if len(calls) == 1:
            await trio.sleep(100)  # an answer that never comes

    async with trio.open_nursery() as nursery:
        wb = WriteBack(upload, is_transient=is_transient)
        await nursery.start(wb.run)
        wb.schedule("a", 60)
        with pytest.raises(trio.TooSlowError):
            await wb.flush("a", patience=5)
        assert wb.pending("a") and not wb.running("a")
        await wb.flush("a")  # the entry is usable: nobody waits on a dead run
        assert len(calls) == 2 and not wb.pending("a")
        nursery.cancel_scope.cancel()


def test_transient_errors_include_timeouts_and_every_5xx() -> None:
    from memfs.contract.errors import ApiError, ApiTimeoutError, BadRequestError, api_error_class

    assert is_transient(ApiTimeoutError("slow"))
    for status in (408, 429, 500, 502, 503, 504, 529):
        cls = api_error_class(status, None, "x")
        assert is_transient(cls("x", status=status)), status
    assert is_transient(ApiError("x", status=599))
    assert not is_transient(BadRequestError("x"))
    assert not is_transient(PreconditionFailedError("x"))


async def test_retries_are_jittered_by_the_shared_policy(clock):
    """Full jitter: each wait is the policy's draw below the backoff ceiling, so queues that
    failed together (an outage) spread their retries instead of retrying in lockstep."""
    gaps: dict[float, list[float]] = {}
    for fraction in (0.25, 0.75):
        rec = Recorder()
        rec.fail["a"] = [ApiConnectionError("down")] * 4
        async with trio.open_nursery() as nursery:
            wb = WriteBack(rec.upload, is_transient=is_transient, retry=policy(fraction))
            await nursery.start(wb.run)
            wb.schedule("a", 0)
            await trio.sleep(60)
            assert not wb.pending("a")
            nursery.cancel_scope.cancel()
        times = [t for _, t in rec.calls]
        gaps[fraction] = [b - a for a, b in itertools.pairwise(times)]
    ceilings = [0.5, 1.0, 2.0, 4.0]
    assert gaps[0.25] == pytest.approx([c * 0.25 for c in ceilings])
    assert gaps[0.75] == pytest.approx([c * 0.75 for c in ceilings])


async def test_retry_after_of_the_last_answer_is_honoured(clock):
    rec = Recorder()
    rec.fail["a"] = [RateLimitError("slow down", retry_after=7.0)]
    async with trio.open_nursery() as nursery:
        wb = WriteBack(rec.upload, is_transient=is_transient, retry=policy(0.5))
        await nursery.start(wb.run)
        wb.schedule("a", 0)
        await trio.sleep(20)
        times = [t for _, t in rec.calls]
        assert len(times) == 2 and times[1] - times[0] == pytest.approx(7.0)
        nursery.cancel_scope.cancel()


class Gate:
    """An upload function whose runs of chosen keys wait until released (and may then fail)."""

    def __init__(self, *held: Hashable) -> None:
        self.held = set(held)
        self.calls: list[Hashable] = []
        self.started: dict[Hashable, trio.Event] = {}
        self.release = trio.Event()
        self.fail_after_release: BaseException | None = None

    async def upload(self, key: Hashable) -> None:
        self.calls.append(key)
        self.started.setdefault(key, trio.Event()).set()
        if key in self.held and self.calls.count(key) == 1:
            await self.release.wait()
            if self.fail_after_release is not None:
                raise self.fail_after_release

    async def release_after(self, seconds: float) -> None:
        await trio.sleep(seconds)
        self.release.set()

    async def running(self, key: Hashable) -> None:
        await self.started.setdefault(key, trio.Event()).wait()


async def test_a_running_key_does_not_hold_up_other_keys(clock):
    """An upload that hangs (a slow server) must not stop the scheduler from starting the
    uploads of other files when they fall due."""
    gate = Gate("slow")
    async with trio.open_nursery() as nursery:
        wb = WriteBack(gate.upload)
        await nursery.start(wb.run)
        wb.schedule("slow", 0)
        await gate.running("slow")
        t0 = trio.current_time()
        wb.schedule("b", 1.0)
        wb.schedule("c", 2.0)
        with trio.fail_after(10):  # virtual seconds: c falls due at 2
            await gate.running("c")
        assert trio.current_time() == pytest.approx(t0 + 2.0)
        assert gate.calls == ["slow", "b", "c"] and wb.running("slow")
        gate.release.set()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("outcome", ["saved again", "fails transiently"])
async def test_cancel_during_a_run_uploads_nothing_more(clock, outcome):
    """A file deleted while its upload runs: that run ends, but neither a save made during it
    nor a retry of its transient failure uploads the file again (it would resurrect it)."""
    gate = Gate("a")
    if outcome == "fails transiently":
        gate.fail_after_release = ApiConnectionError("down")
    async with trio.open_nursery() as nursery:
        wb = WriteBack(gate.upload, is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        wb.schedule("a", 0)
        await gate.running("a")
        if outcome == "saved again":
            wb.schedule("a", 0.5)
        wb.cancel("a")
        gate.release.set()
        await trio.sleep(60)  # far beyond any re-run or retry (0.5 s backoff)
        assert gate.calls == ["a"] and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_flush_of_a_running_key_includes_the_save_made_during_the_run(clock):
    """fsync while an older version is being uploaded returns only once the newer save (made
    during that upload) is on the server too."""
    gate = Gate("a")
    async with trio.open_nursery() as nursery:
        wb = WriteBack(gate.upload)
        await nursery.start(wb.run)
        wb.schedule("a", 0)
        await gate.running("a")
        wb.schedule("a", 60)  # the newer save, due long after the flush
        nursery.start_soon(gate.release_after, 1.0)
        await wb.flush("a")
        assert gate.calls == ["a", "a"] and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_flush_with_patience_while_the_file_is_saved_again(clock):
    """A save arriving during fsync's upload leaves new work queued; the fsync itself succeeds
    (its data is on the server) and the new save is uploaded later."""
    calls: list[Hashable] = []
    queue: list[WriteBack] = []

    async def upload(key: Hashable) -> None:
        calls.append(key)
        if len(calls) == 1:
            queue[0].schedule(key, 5)

    async with trio.open_nursery() as nursery:
        wb = WriteBack(upload, is_transient=is_transient)
        queue.append(wb)
        await nursery.start(wb.run)
        wb.schedule("a", 60)
        await wb.flush("a", patience=30)
        assert calls == ["a"] and wb.pending("a")
        await trio.sleep(10)
        assert calls == ["a", "a"] and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_patience_under_a_second_still_retries(clock):
    """Any patience retries a transient failure after the queue's backoff (0.5 s first), for one
    key (fsync) and for all (fsync of a directory, unmount)."""
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        rec.fail["a"] = [ApiConnectionError("down")]
        wb.schedule("a", 60)
        await wb.flush("a", patience=0.9)
        assert [k for k, _ in rec.calls] == ["a", "a"] and not wb.pending("a")
        rec.fail["b"] = [ApiConnectionError("down")]
        wb.schedule("b", 60)
        wb.schedule("c", 60)
        assert await wb.flush_all(patience=0.9) == []
        assert sorted(k for k, _ in rec.calls[2:]) == ["b", "b", "c"] and len(wb) == 0
        nursery.cancel_scope.cancel()


async def test_a_run_cut_by_a_flush_deadline_is_retried_after_the_backoff(clock):
    """fsync gave up mid-upload (answer unknown): the background retries the upload after the
    first backoff (0.5 s) — not at the old due time, not at once in a tight loop."""
    calls: list[float] = []

    async def upload(key: Hashable) -> None:
        calls.append(trio.current_time())
        if len(calls) == 1:
            await trio.sleep(100)  # an answer that never comes

    async with trio.open_nursery() as nursery:
        wb = WriteBack(upload, is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        wb.schedule("a", 60)
        with pytest.raises(trio.TooSlowError):
            await wb.flush("a", patience=5)
        gave_up = trio.current_time()
        await trio.sleep(10)
        assert calls[1:] == [pytest.approx(gave_up + 0.5)] and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_durability_hooks_name_the_key_and_its_error(clock):
    """The journal learns from these hooks which file's record to keep (a retry) or settle
    (done, refused): each names the key and the error of that run."""
    rec = Recorder()
    down, refused = ApiConnectionError("down"), PreconditionFailedError("changed")
    rec.fail["a"] = [down, refused]
    seen: list[tuple[str, Hashable, BaseException | None]] = []
    async with trio.open_nursery() as nursery:
        wb = WriteBack(
            rec.upload,
            is_transient=is_transient,
            retry=policy(),
            on_done=lambda key, exc: seen.append(("done", key, exc)),
        )
        wb.on_retry = lambda key, exc: seen.append(("retry", key, exc))
        await nursery.start(wb.run)
        wb.schedule("a", 0)
        wb.schedule("b", 0)
        await trio.sleep(5)
        assert sorted(seen, key=str) == sorted(
            [("retry", "a", down), ("done", "a", refused), ("done", "b", None)], key=str
        )
        nursery.cancel_scope.cancel()


async def test_flush_all_with_patience_gives_up_in_time(clock):
    """Unmount's flush with patience ends when its time is up, reporting what is still failing,
    and keeps that work queued."""
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        wb = await start(rec, nursery)
        await trio.sleep(1000)  # the deadline is relative to now, not to the clock's zero
        rec.fail["a"] = [ApiConnectionError("down")] * 100
        wb.schedule("a", 60)
        t0 = trio.current_time()
        errors = await wb.flush_all(patience=10)
        assert trio.current_time() - t0 == pytest.approx(10)
        assert len(errors) == 1 and isinstance(errors[0], ApiConnectionError)
        assert wb.pending("a")
        nursery.cancel_scope.cancel()
