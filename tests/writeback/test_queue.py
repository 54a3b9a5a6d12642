"""The write-back queue's scheduling edges: cancel and deadlines, waiters on a run in progress,
due times of several keys, the default policy, and the concurrency limit.

The upload is a function the test controls and the clock trio's autojump clock (virtual time),
as in ``tests/writeback/test_retry.py``. A check that something did *not* happen waits for a
probe key due after the moment it would have happened: the probe's upload is the event.

Mutants left alive (``make mutate``): ``False`` flags set to ``None`` (as false), ``<=`` for
``<`` between due times (equal due times keep the same one), ``running = False`` of the cut run
(the ``finally`` sets it again), ``patience >= 0`` in ``flush_all`` (a patience of 0 is no
patience either way), the unreachable ``RuntimeError`` guard of ``_run_one`` and its default,
and the default policy's ``base_delay`` left out (0.5 s is ``RetryPolicy``'s own default).
docs/mutation.md lists them all.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Hashable

import pytest
import trio
import trio.testing

from memfs.contract.errors import ApiConnectionError, PreconditionFailedError
from memfs.contract.retry import RetryPolicy, is_transient
from memfs.writeback.queue import FLUSH_RUNS, WriteBack

DOWN = ApiConnectionError("down")


class Fixed:
    """A random source drawing the top of the range: every backoff is its ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


def policy() -> RetryPolicy:
    return RetryPolicy(base_delay=0.5, max_delay=30.0, rng=Fixed())


class Script:
    """Uploads that record ``(key, time)``; each run of a key takes the next item of its lists:
    ``fail`` (an error to raise, None: success), ``during`` (a call into the queue while it
    runs); ``hold`` makes the next run wait for an event."""

    def __init__(self) -> None:
        self.calls: list[tuple[Hashable, float]] = []
        self.fail: dict[Hashable, list[BaseException | None]] = {}
        self.hold: dict[Hashable, trio.Event] = {}
        self.started: dict[Hashable, trio.Event] = {}
        self.during: dict[Hashable, list[Callable[[], object] | None]] = {}
        self.done: list[tuple[Hashable, BaseException | None]] = []
        self.failures: list[tuple[Hashable, BaseException]] = []

    async def upload(self, key: Hashable) -> None:
        self.calls.append((key, trio.current_time()))
        self.started.setdefault(key, trio.Event()).set()
        callbacks = self.during.get(key)
        callback = callbacks.pop(0) if callbacks else None
        if callback is not None:
            callback()
        gate = self.hold.pop(key, None)
        if gate is not None:
            await gate.wait()
        errors = self.fail.get(key)
        error = errors.pop(0) if errors else None
        if error is not None:
            raise error

    def keys(self) -> list[Hashable]:
        return [key for key, _ in self.calls]

    def times(self, key: Hashable) -> list[float]:
        return [at for k, at in self.calls if k == key]

    def queue(self, **kwargs: object) -> WriteBack:
        return WriteBack(
            self.upload,
            on_done=lambda key, exc: self.done.append((key, exc)),
            on_failure=lambda key, exc: self.failures.append((key, exc)),
            **kwargs,  # type: ignore[arg-type]
        )

    async def running(self, key: Hashable) -> None:
        await self.started.setdefault(key, trio.Event()).wait()
        self.started.pop(key)


async def set_soon(event: trio.Event) -> None:
    """Set ``event`` once the caller is waiting (a task started now runs after it blocks)."""
    event.set()


@pytest.fixture
def clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


async def probe(wb: WriteBack, script: Script, delay: float) -> None:
    """Wait until a probe key scheduled ``delay`` seconds from now has been uploaded: by then
    the queue has started everything due before it."""
    wb.schedule("probe", delay)
    with trio.fail_after(delay + 10):
        await script.running("probe")
    await trio.testing.wait_all_tasks_blocked()


async def test_a_cancelled_key_cut_by_a_flush_deadline_is_not_uploaded_again(clock):
    """unlink during an fsync whose upload never answers: when fsync gives up, the file is
    forgotten, not uploaded again at its old due time (that would resurrect it)."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        script.hold["a"] = trio.Event()  # an answer that never comes
        script.during["a"] = [lambda: wb.cancel("a")]
        wb.schedule("a", 60)
        await wb.flush("a", patience=5)  # gives up at 5 s: nothing is left to upload
        assert not wb.pending("a") and len(wb) == 0
        await probe(wb, script, 120)
        assert script.keys() == ["a", "probe"]
        assert script.done == [("a", None), ("probe", None)]  # done once, when cancelled
        nursery.cancel_scope.cancel()


async def test_each_key_starts_at_its_own_due_time(clock):
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue()
        await nursery.start(wb.run)
        t0 = trio.current_time()
        wb.schedule("late", 3)
        wb.schedule("early", 1)
        wb.schedule("now", 0)
        wb.schedule("past", -5)
        await probe(wb, script, 4)
        assert dict(script.calls) == {
            "now": t0,
            "past": t0,
            "early": t0 + 1,
            "late": t0 + 3,
            "probe": t0 + 4,
        }
        nursery.cancel_scope.cancel()


async def test_queries_of_keys(clock):
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue()
        await nursery.start(wb.run)
        assert not wb.running("a") and not wb.pending("a") and wb.keys() == [] and len(wb) == 0
        release = script.hold["a"] = trio.Event()
        wb.schedule("a", 0)
        wb.schedule("b", 10)
        await script.running("a")
        assert wb.running("a") and not wb.running("b") and not wb.running("c")
        assert wb.keys() == ["a", "b"] and len(wb) == 2 and wb.pending("b")
        release.set()
        nursery.cancel_scope.cancel()


async def test_cancel_of_an_unknown_key_still_reports_it_done(clock):
    script = Script()
    wb = script.queue()
    wb.cancel("ghost")
    assert script.done == [("ghost", None)] and len(wb) == 0


async def test_on_cancel_hears_a_cancel_after_on_done_and_never_an_upload(clock):
    """A cancel's forgetting is made durable by ``on_cancel`` (the journal's flush of the drop
    that ``on_done`` wrote); an upload's ``on_done`` is not followed by it."""
    script = Script()
    heard: list[tuple[str, Hashable]] = []
    wb = WriteBack(
        script.upload,
        on_done=lambda key, exc: heard.append(("done", key)),
        on_cancel=lambda key: heard.append(("cancel", key)),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(wb.run)
        wb.schedule("a", 0)
        wb.schedule("b", 60)
        await wb.flush("a")
        wb.cancel("b")
        assert heard == [("done", "a"), ("done", "b"), ("cancel", "b")]
        nursery.cancel_scope.cancel()


async def test_a_save_after_a_cancel_during_the_run_is_uploaded(clock):
    """Deleted while uploading, then created again under the same key: the new save counts."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue()
        await nursery.start(wb.run)
        release = script.hold["a"] = trio.Event()
        wb.schedule("a", 0)
        await script.running("a")
        wb.cancel("a")
        wb.schedule("a", 2)
        release.set()
        with trio.fail_after(10):
            await script.running("a")
        assert len(script.times("a")) == 2 and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_the_default_is_one_try_and_a_permanent_failure(clock):
    """Without ``is_transient`` every error is permanent: handed to on_failure, then done."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue()
        await nursery.start(wb.run)
        script.fail["a"] = [DOWN]
        wb.schedule("a", 0)
        await probe(wb, script, 60)
        assert script.keys() == ["a", "probe"] and not wb.pending("a")
        assert script.failures == [("a", DOWN)] and ("a", DOWN) in script.done
        nursery.cancel_scope.cancel()


async def test_the_default_policy_retries_within_half_a_second(clock):
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient)
        await nursery.start(wb.run)
        script.fail["a"] = [DOWN]
        wb.schedule("a", 0)
        await probe(wb, script, 0.5)
        first, second = script.times("a")
        assert 0 <= second - first <= 0.5 and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_the_default_policy_backs_off_up_to_thirty_seconds(clock):
    """docs/semantics.md: "full jitter below 0.5 s doubling to 30 s". From the seventh failure
    on, every wait is drawn between 0 and 30 s: over hundreds of them, none is longer and some
    come within a second of it. The draws are random (the default policy's own source), but a
    ceiling of 31 s goes unseen only if 590 draws all stay below 30 s, (30/31)**590 < 1e-8;
    one of 29 s or less, if they all do with a 30 s ceiling, (29/30)**590 < 1e-8."""
    script = Script()
    wb = script.queue(is_transient=is_transient)
    script.fail["a"] = [DOWN] * 600
    wb.schedule("a", 0)
    await wb.flush("a", patience=1e9)  # retries after each backoff, until the upload succeeds
    times = script.times("a")
    assert len(times) == 601 and not wb.pending("a")
    waits = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert max(waits) <= 30.0 + 1e-6
    assert max(waits[10:]) > 29.0
    assert max(waits[:6]) <= 16.0 + 1e-6  # before: 0.5 s doubling


async def test_four_uploads_run_at_once_by_default(clock):
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue()
        await nursery.start(wb.run)
        gates = {key: trio.Event() for key in "abcde"}
        script.hold.update(gates)
        for key in "abcde":
            wb.schedule(key, 0)
        await trio.testing.wait_all_tasks_blocked()
        assert len(script.keys()) == 4  # the fifth waits for a slot (trio picks which)
        assert all(wb.running(key) for key in "abcde")  # claimed all the same
        (waiting,) = set("abcde") - set(script.keys())
        gates[script.keys()[0]].set()
        with trio.fail_after(10):
            await script.running(waiting)
        for gate in gates.values():
            gate.set()
        nursery.cancel_scope.cancel()


async def test_flush_waiting_on_a_run_that_fails_transiently_raises_its_error(clock):
    """fsync meeting a background upload that fails: the error is fsync's, and the retry keeps
    its backoff (no second run at once)."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        release = script.hold["a"] = trio.Event()
        script.fail["a"] = [DOWN]
        wb.schedule("a", 0)
        await script.running("a")
        nursery.start_soon(set_soon, release)
        with pytest.raises(ApiConnectionError):
            await wb.flush("a")
        assert script.keys() == ["a"] and wb.pending("a")
        await wb.flush("a")  # not waiting on a run: runs it now, and succeeds
        assert script.keys() == ["a", "a"] and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_flush_waiting_on_a_run_after_an_earlier_failure_sees_this_run(clock):
    """An error of an earlier run is forgotten once a run succeeds: a flush waiting on the
    successful run (which was saved to again) runs the new save and succeeds."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        script.fail["a"] = [DOWN]
        wb.schedule("a", 0)
        await script.running("a")
        release = script.hold["a"] = trio.Event()
        with trio.fail_after(10):
            await script.running("a")  # the retry, after 0.5 s
        wb.schedule("a", 60)  # saved again during the retry
        nursery.start_soon(set_soon, release)
        await wb.flush("a")
        assert len(script.times("a")) == 3 and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_backoff_starts_over_after_a_success(clock):
    """A success that was saved to meanwhile keeps the key queued, but its failures are over:
    the next failure waits the first backoff again."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        t0 = trio.current_time()
        script.fail["a"] = [DOWN, DOWN, None, DOWN]
        script.during["a"] = [None, None, lambda: wb.schedule("a", 1)]
        wb.schedule("a", 0)
        await probe(wb, script, 10)
        # fail, +0.5 fail, +1.0 ok (saved again: due 1 s later), fail, +0.5 ok
        assert script.times("a") == [t0, t0 + 0.5, t0 + 1.5, t0 + 2.5, t0 + 3.0]
        assert not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_a_save_during_a_failing_run_is_due_when_it_asked(clock):
    """A run fails transiently while a newer save waits: the next run is the newer save's, at
    its own due time (it will carry the failed one too), not the backoff's."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        t0 = trio.current_time()
        script.fail["a"] = [DOWN]
        script.during["a"] = [lambda: wb.schedule("a", 5)]
        wb.schedule("a", 0)
        await probe(wb, script, 6)
        assert script.times("a") == [t0, t0 + 5] and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_flush_with_patience_ends_at_a_permanent_failure(clock):
    """A refusal ends fsync's retrying at once, handed to ``on_failure``. (Whether ``flush``
    raises it too is left open here: today it does not, see the strict xfail
    ``test_a_patient_flush_raises_a_permanent_failure`` in tests/core/test_queue.py. No
    background loop here: the retry is the flush's own, not a race with ``run``.)"""
    script = Script()
    refused = PreconditionFailedError("changed")
    wb = script.queue(is_transient=is_transient, retry=policy())
    script.fail["a"] = [DOWN, refused]
    wb.schedule("a", 60)
    t0 = trio.current_time()
    with contextlib.suppress(PreconditionFailedError):
        await wb.flush("a", patience=30)
    assert trio.current_time() == t0 + 0.5  # one backoff, then the refusal
    assert script.failures == [("a", refused)] and not wb.pending("a")


async def test_flush_with_patience_ends_quietly_when_the_key_is_cancelled_meanwhile(clock):
    """fsync retrying a failed upload of a file that is then unlinked: nothing is left to be
    durable, so fsync returns when its time is up instead of raising."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        script.fail["a"] = [DOWN]
        wb.schedule("a", 60)

        async def unlink_soon() -> None:
            await trio.sleep(0.1)
            wb.cancel("a")

        nursery.start_soon(unlink_soon)
        await wb.flush("a", patience=0.3)  # ends during the 0.5 s backoff
        assert script.keys() == ["a"] and not wb.pending("a")
        nursery.cancel_scope.cancel()


async def test_flush_all_runs_keys_queued_during_the_pass(clock):
    """Unmount's flush: an upload that queues more work (a conflict copy) has it run too."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue()
        await nursery.start(wb.run)
        script.during["a"] = [lambda: wb.schedule("copy", 60)]
        wb.schedule("a", 60)
        assert await wb.flush_all() == []
        assert script.keys() == ["a", "copy"] and len(wb) == 0
        nursery.cancel_scope.cancel()


async def test_flush_all_runs_again_a_key_requested_during_its_run_a_bounded_number_of_times(
    clock,
):
    """A file renamed while its create ran is queued again: unmount's flush uploads that too;
    a key re-requested by each of its runs (a writer that never stops) does not hold it forever."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue()
        await nursery.start(wb.run)
        script.during["renamed"] = [lambda: wb.schedule("renamed", 60)]
        script.during["busy"] = [lambda: wb.schedule("busy", 60)] * 10
        wb.schedule("renamed", 60)
        wb.schedule("busy", 60)
        assert await wb.flush_all() == []
        assert script.keys().count("renamed") == 2 and not wb.pending("renamed")
        assert script.keys().count("busy") == FLUSH_RUNS and wb.pending("busy")
        nursery.cancel_scope.cancel()


async def test_a_deadline_with_no_run_ended_raises_the_last_error_of_the_key(clock):
    """fsync meeting a key that already failed in the background, whose own run then hangs:
    the error it reports is that last failure (it says why), not just "too slow"."""
    script = Script()
    wb = script.queue(is_transient=is_transient, retry=policy())
    script.fail["a"] = [DOWN]
    wb.schedule("a", 60)
    with pytest.raises(ApiConnectionError):
        await wb.flush("a")
    script.hold["a"] = trio.Event()  # the next answer never comes
    with pytest.raises(ApiConnectionError):
        await wb.flush("a", patience=5)
    script.hold["b"] = trio.Event()
    wb.schedule("b", 60)
    with pytest.raises(trio.TooSlowError, match=r"^b not done within 5 s$"):
        await wb.flush("b", patience=5)


async def test_a_run_cut_by_a_deadline_counts_as_one_more_failure(clock):
    """Two failures, then a run cut by fsync's deadline: the next retry waits the third
    backoff (2 s), as after any third failure in a row."""
    script = Script()
    async with trio.open_nursery() as nursery:
        wb = script.queue(is_transient=is_transient, retry=policy())
        await nursery.start(wb.run)
        script.fail["a"] = [DOWN, DOWN]
        wb.schedule("a", 0)
        await script.running("a")
        await script.running("a")  # the first retry, 0.5 s later: fails too (1 s backoff)
        script.hold["a"] = trio.Event()  # the next run hangs
        with pytest.raises(ApiConnectionError):  # the last error: no run ended in time
            await wb.flush("a", patience=0.2)
        cut = trio.current_time()
        script.started.pop("a")  # that (cut) run started; wait for the next
        with trio.fail_after(10):
            await script.running("a")
        assert trio.current_time() == cut + 2.0
        nursery.cancel_scope.cancel()


async def test_failures_are_logged_with_key_attempt_and_error(
    clock, caplog: pytest.LogCaptureFixture
):
    """The mount's log is where a user learns why a file is not on the server yet."""
    script = Script()
    wb = script.queue(is_transient=lambda exc: exc is DOWN, retry=policy())
    script.fail["a"] = [DOWN, PreconditionFailedError("changed")]
    wb.schedule("a", 60)
    with contextlib.suppress(PreconditionFailedError):  # see the test above
        await wb.flush("a", patience=30)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "upload of a failed (attempt 1), retrying in 0.5 s: down"),
        ("ERROR", f"upload of a failed for good: {PreconditionFailedError('changed')}"),
    ]
