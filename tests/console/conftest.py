"""Fixtures of the console's tests: one Chromium per test session, a fresh browser context per
test, and one ``memfs server`` per module (with its access log, to look for keys in it); for
the tests without a browser, a SQLite ``storage`` of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kit.browser import TIMEOUT_MS, Watched, api, launch_args, sign_in
from kit.servers import ServerProcess, free_port
from memfs.server.backends.sqlite import SqliteStorage


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[SqliteStorage]:
    store = await SqliteStorage.open(tmp_path / "memfs.db")
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(**launch_args())
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    where = tmp_path_factory.mktemp("console")
    proc = ServerProcess(
        db=where / "memfs.db",
        port=free_port(),
        extra_args=["--access-log", str(where / "access.log")],
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def access_log(console_server: ServerProcess) -> Path:
    return console_server.db.parent / "access.log"


@pytest.fixture
def watched() -> Watched:
    return Watched()


@pytest.fixture
def page(browser: Any, watched: Watched) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        watched.attach(page)
        yield page
    finally:
        context.close()


@pytest.fixture
def client(console_server: ServerProcess) -> Iterator[httpx.Client]:
    """The API of the module's server, to seed stores and write as another writer."""
    with api(console_server.base_url, console_server.api_key) as client:
        yield client


@pytest.fixture
def console(page: Any, console_server: ServerProcess) -> Any:
    """A page signed in to the module's server; it is on the stores page."""
    return sign_in(page, console_server.base_url, console_server.api_key)
