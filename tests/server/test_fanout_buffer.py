"""What the shared feeds of ``memfs.server.http.fanout`` hold: the events a live follower has
sent are dropped, and followers that never read (a slow client, or one holding streams on purpose)
cannot make the feeds of one process hold more than their byte budget, however many stores they
follow. The feeds read from a log the test appends to (the storage's place)."""

from __future__ import annotations

from contextlib import ExitStack

import trio

from memfs.server.db.notify import ChangeHub
from memfs.server.http.fanout import Fanout, Follower, Page, SharedEvent
from memfs.server.http.metrics import Metrics

SIZE = 100  # bytes of each event


class Log:
    """The committed changes of each topic, numbered 1, 2, 3… (what storage would return)."""

    def __init__(self, hub: ChangeHub) -> None:
        self.hub = hub
        self.changes: dict[str, list[SharedEvent[str]]] = {}

    def commit(self, topic: str) -> None:
        changes = self.changes.setdefault(topic, [])
        position = len(changes) + 1
        changes.append(SharedEvent(position, f"{topic}:{position}", SIZE))
        self.hub.publish(topic)

    def reader(self, topic: str):  # type: ignore[no-untyped-def]
        async def read(after: int, rich: bool) -> Page[str]:
            await trio.lowlevel.checkpoint()
            page = [c for c in self.changes.get(topic, []) if c.position > after][:100]
            return page, len(page) == 100

        return read


async def test_a_live_followers_sent_events_are_dropped() -> None:
    hub = ChangeHub()
    log = Log(hub)
    fanout: Fanout[str] = Fanout(hub, "memory_stores", Metrics())
    read = log.reader("s")
    with (
        hub.subscribe("s") as sub,
        fanout.follower(sub, 0, rich=False, read_shared=read, read_own=read) as follower,
    ):
        got: list[str] = []
        for _ in range(5):
            log.commit("s")
            with trio.fail_after(5):
                while len(got) < len(log.changes["s"]):
                    batch = await follower.next()
                    assert isinstance(batch, list)
                    got += [event.payload for event in batch]
        log.commit("s")
        with trio.fail_after(5):
            batch = await follower.next()
        assert isinstance(batch, list)
        got += [event.payload for event in batch]
        feed = fanout.feed("s")
        assert feed is not None
        # The last read's event only: what the follower had sent before it is gone.
        assert feed.after(feed.base, rich=False) == batch
        assert fanout.budget.held == SIZE
    assert got == [f"s:{i}" for i in range(1, 7)]
    assert fanout.feed("s") is None and fanout.budget.held == 0


async def take(follower: Follower[str], count: int) -> list[str]:
    """The payloads of the next ``count`` events ``follower`` gets."""
    got: list[str] = []
    with trio.fail_after(5):
        while len(got) < count:
            batch = await follower.next()
            assert isinstance(batch, list)
            got += [event.payload for event in batch]
    return got


async def test_followers_that_never_read_cannot_exceed_the_byte_budget() -> None:
    hub = ChangeHub()
    log = Log(hub)
    budget = 10 * SIZE
    fanout: Fanout[str] = Fanout(hub, "memory_stores", Metrics(), max_bytes_total=budget)
    topics = ("a", "b", "c")
    with ExitStack() as streams:
        stalled: dict[str, Follower[str]] = {}
        for topic in topics:  # per store, a stream that stops reading after its first event
            read = log.reader(topic)
            sub = streams.enter_context(hub.subscribe(topic))
            follower = fanout.follower(sub, 0, rich=False, read_shared=read, read_own=read)
            stalled[topic] = streams.enter_context(follower)
            log.commit(topic)
            assert await take(stalled[topic], 1) == [f"{topic}:1"]
        for _ in range(30):
            for topic in topics:
                log.commit(topic)
        for topic in topics:  # and a live one, whose feed reads all 30
            read = log.reader(topic)
            sub = streams.enter_context(hub.subscribe(topic))
            follower = fanout.follower(sub, 1, rich=False, read_shared=read, read_own=read)
            live = streams.enter_context(follower)
            assert await take(live, 30) == [f"{topic}:{i}" for i in range(2, 32)]
        # Three stores' 90 events pinned by stalled streams: the budget holds 10.
        assert fanout.budget.held <= budget
        # The stalled ones catch up from the log on their own, in order, nothing lost.
        for topic in topics:
            assert await take(stalled[topic], 30) == [f"{topic}:{i}" for i in range(2, 32)]
    assert fanout.budget.held == 0
