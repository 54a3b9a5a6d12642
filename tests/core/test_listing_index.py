"""A listing's name index follows its patches: after any sequence of items added and removed
(upload answers, the feed's versions, directories appearing and emptying), looking a name or a
memory id up in the patched listing answers what a listing built from the same items does."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.contract.models import ListItem, Memory, MemoryPrefix
from memfs.core.fetch.cache import Listing, ListingCache

WHEN = datetime(2026, 1, 1, tzinfo=UTC)
NAMES = ["a", "a.md", "b", "x", "x.file-clash"]


def item(name: str, *, memory_id: str | None = None) -> ListItem:
    """A memory ``/d/<name>`` (with ``memory_id``) or, without one, the prefix ``/d/<name>/``."""
    if memory_id is None:
        return MemoryPrefix(f"/d/{name}/")
    return Memory(memory_id, "memstore_1", f"/d/{name}", "0" * 64, 1, "memver_1", WHEN, WHEN)


def same_answers(patched: Listing) -> None:
    fresh = Listing(patched.started, patched.items)
    for name in [*NAMES, "missing"]:
        assert patched.named(name) == fresh.named(name)
    for n in range(len(NAMES)):
        memory_id = f"mem_{n}"
        assert patched.name_of(memory_id) == fresh.name_of(memory_id)
        assert patched.memory(memory_id) == fresh.memory(memory_id)
    for name in NAMES:
        assert patched.directory_item(f"/d/{name}") == fresh.directory_item(f"/d/{name}")


# a step: add or remove the memory (its id fixed by its name) or the prefix called NAMES[n]
steps = st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, len(NAMES) - 1)))


@settings(max_examples=200, deadline=None)
@given(steps=steps)
def test_a_patched_listing_answers_as_a_fresh_one(steps: list[tuple[bool, bool, int]]) -> None:
    listing = Listing(0.0, (item("b", memory_id="mem_2"), item("x")))
    listing.named("b")  # indexed: patches carry the index over from now on
    for add, is_memory, n in steps:
        new = item(NAMES[n], memory_id=f"mem_{n}" if is_memory else None)
        present = next((i for i in listing.items if i == new), None)
        if add and present is None:
            listing = listing.with_item(new, now=1.0)
        elif not add and present is not None:
            listing = listing.without(present, now=1.0)
        same_answers(listing)
    assert [i.path for i in listing.items] == sorted(i.path for i in listing.items)


def test_the_cache_patches_keep_the_index_of_a_cached_listing() -> None:
    listings = ListingCache()
    memories = {name: item(name, memory_id=f"mem_{n}") for n, name in enumerate(["a", "b"])}
    assert isinstance(memories["a"], Memory)
    listings.put("/", Listing(0.0, (MemoryPrefix("/d/"),)))
    listings.put("/d", Listing(0.0, tuple(memories.values())))
    listings.put("/d/sub", Listing(0.0, ()))
    before = listings.stale("/d")
    assert before is not None and before.memory("mem_0") == memories["a"]
    later = WHEN + timedelta(seconds=1)
    moved = Memory("mem_0", "memstore_1", "/d/sub/a", "1" * 64, 1, "memver_2", WHEN, later)
    listings.record(moved)  # renamed into /d/sub: /d shows the directory now
    after = listings.stale("/d")
    assert after is not None
    assert after.named("a") == () and after.memory("mem_0") is None
    assert [i.path for i in after.named("sub")] == ["/d/sub/"]
    same_answers(after)


def test_a_feed_does_not_vouch_for_listings_fetched_before_it_started() -> None:
    listings = ListingCache(ttl=0.0)  # only the feed's vouch keeps a listing fresh
    before = Listing(started=time.monotonic(), items=())
    assert listings.put("/", before)
    listings.distrust_older()  # the feed starts: it reports changes from now on
    listings.vouch(math.inf)
    assert listings.get("/") is None  # it may miss a change the feed will never report
    assert listings.stale("/") is before  # yet it is what an outage shows
    after = Listing(started=time.monotonic(), items=())
    assert listings.put("/", after)
    assert listings.get("/") is after
