"""Waiting for an event instead of sleeping: poll a predicate until it holds, with a deadline.

A check that something did NOT happen waits with these for an event proving it would have
happened by then (a later upload seen on the server, a counter in ``memfs status --json``), never
for a fixed time.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)


async def wait_until(
    predicate: Callable[[], Any | Awaitable[Any]], timeout: float = 10.0, interval: float = 0.01
) -> Any:
    """``wait_for`` inside trio: poll ``predicate`` (sync, or async) between checkpoints."""
    with trio.fail_after(timeout):
        while True:
            value = predicate()
            if isinstance(value, Awaitable):
                value = await value
            if value:
                return value
            await trio.sleep(interval)
