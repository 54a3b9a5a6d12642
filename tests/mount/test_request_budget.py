"""Request budgets of a mount, so that nothing made faster costs more requests (requests are
deterministic, unlike time; docs/benchmarks.md reports the same counts). Start-up to the first
``ls``, a cold ``grep -r`` and writing new files each cost a fixed number of requests, counted
by route in ``memfs status --json`` (the change feed's own requests aside)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

from kit.mounts import MountedStore
from kit.waiting import wait_for

MEMORIES = 250  # more than a listing page (100) and many bulk pages (20)
DIRECTORIES = 5
LIST = "GET /v1/memory_stores/{store}/memories"
CREATE = "POST /v1/memory_stores/{store}/memories"
GREP_BUDGET = 20  # measured when this budget was set (issue 13); more is a regression


def _requests_now(mounted: MountedStore) -> dict[str, int]:
    """The request counts of a status document collected after this call began (the daemon
    publishes one every second, stamped to the second)."""
    asked = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = wait_for(lambda: (d := mounted.status())["time"] > asked and d, timeout=10)
    routes: dict[str, int] = doc["requests"]["by_route"]
    return {route: n for route, n in routes.items() if "/memfs/changes" not in route}


def test_start_ls_grep_and_writes_cost_fixed_request_counts(
    mount_factory: Callable[..., MountedStore],
) -> None:
    memories = {f"/d{i % DIRECTORIES}/note-{i:03}.md": f"note {i}\n" for i in range(MEMORIES)}
    mounted = mount_factory(memories=memories)
    # the capabilities once: the store's limits (NUL refused?), the change feed and search
    started = {"GET /v1/memfs/capabilities": 1, "GET /v1/memory_stores/{store}": 1}
    assert _requests_now(mounted) == started

    # the first ls: one listing of the root (the directories are prefixes of one page)
    assert sorted(os.listdir(mounted.path)) == [f"d{i}" for i in range(DIRECTORIES)]
    assert _requests_now(mounted) == started | {LIST: 1}

    # a cold grep -r: listings and contents in bulk pages of 20, no single reads (the rule is
    # in tests/core/with_server/test_walk_readahead.py)
    found = subprocess.run(["grep", "-rl", "note 7$", str(mounted.path)], capture_output=True)
    assert found.stdout.decode().splitlines() == [str(mounted.path / "d2" / "note-007.md")]
    walked = _requests_now(mounted)
    assert walked.keys() == started.keys() | {LIST}
    assert walked[LIST] <= GREP_BUDGET

    # new files: one create each, no lookup or listing before it
    for i in range(20):
        (mounted.path / f"new-{i:02}.md").write_text(f"new {i}\n")
    mounted.settle()
    assert _requests_now(mounted) == walked | {CREATE: 20}
    assert mounted.content("/new-19.md") == "new 19\n"
