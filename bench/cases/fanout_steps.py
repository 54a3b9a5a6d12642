"""Count the event loop's work of change-stream fan-out: trio task steps per change, and how many
of them run before a write's answer is out, with N followers of one store.

The fan-out machinery alone (``memfs.server.http.fanout`` on a ``ChangeHub``; storage is a list the
script appends to, each read one checkpoint; each stream's send one checkpoint, as Hypercorn's
send lock is), no HTTP: counts, not times, so a loaded machine does not blur them. After each
commit the writer makes 10 more checkpoints (its answer: rendering, Hypercorn's send); "ahead"
counts the other tasks' steps the loop runs before those are done (what the write's answer waits
behind). ``--gap``: seconds between commits (0: back to back, each after the previous answer).

This case owns no product code.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

import trio
import trio.testing

from bench.harness import Case, Row
from memfs.server.db.notify import ChangeHub
from memfs.server.http.fanout import Fanout, Page, SharedEvent
from memfs.server.http.metrics import Metrics

ANSWER_YIELDS = 10


class StepCounter(trio.abc.Instrument):
    """Task steps, and those of other tasks than ``writer`` while ``counting``."""

    def __init__(self, writer: trio.lowlevel.Task) -> None:
        self.writer = writer
        self.steps = 0
        self.ahead = 0
        self.counting = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1
        if self.counting and task is not self.writer:
            self.ahead += 1


@dataclass
class Result:
    followers: int
    gap: float
    steps: float  # per change
    ahead: float  # per change: other tasks' steps before the writer's answer was out


async def measure(followers: int, changes: int, gap: float) -> Result:
    hub = ChangeHub()
    log: list[SharedEvent[str]] = []

    async def read(after: int, rich: bool) -> Page[str]:
        await trio.lowlevel.checkpoint()
        return [event for event in log if event.position > after], False

    fanout: Fanout[str] = Fanout(hub, "memory_stores", Metrics())
    got = [0] * followers

    async def stream(i: int, *, task_status: trio.TaskStatus[None]) -> None:
        with (
            hub.subscribe("s") as sub,
            fanout.follower(sub, 0, rich=False, read_shared=read, read_own=read) as follower,
        ):
            task_status.started()
            while True:
                batch = await follower.next()
                if isinstance(batch, list):
                    got[i] += len(batch)
                    await trio.lowlevel.checkpoint()  # the send

    def commit() -> None:
        log.append(SharedEvent(len(log) + 1, "change", 1))
        hub.publish("s")

    counter = StepCounter(trio.lowlevel.current_task())
    async with trio.open_nursery() as nursery:
        for i in range(followers):
            await nursery.start(stream, i)
        commit()  # every stream joins the store's feed
        while min(got) < 1:
            await trio.sleep(0.01)
        trio.lowlevel.add_instrument(counter)
        for _ in range(changes):
            commit()
            counter.counting = True
            for _ in range(ANSWER_YIELDS):
                await trio.lowlevel.checkpoint()
            counter.counting = False
            await trio.sleep(gap)
        while min(got) < changes + 1:
            await trio.sleep(0.001)
        trio.lowlevel.remove_instrument(counter)
        nursery.cancel_scope.cancel()
    return Result(followers, gap, counter.steps / changes, counter.ahead / changes)


class FanoutStepsCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--followers", type=int, nargs="+", default=[300, 1000])
        parser.add_argument("--changes", type=int, default=20)
        parser.add_argument("--gap", type=float, nargs="+", default=[0.05, 0.0])

    def note(self, options: argparse.Namespace) -> str:
        return (
            "steps: task steps per change; ahead: steps ahead of the write's answer; "
            f"{options.changes} changes"
        )

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        rows: list[Row] = []
        for n in options.followers:
            for gap in options.gap:
                rows.append(asdict(trio.run(measure, n, options.changes, gap)))
        return rows


CASE = FanoutStepsCase()
