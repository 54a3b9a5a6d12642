"""Fixtures for fault tests: a private server with the fault middleware installed (no fault yet).

``faulty_server.set_faults(spec)`` switches faults at run time through the admin endpoint
(``memfs.server.http.faults``) with the server's admin key (``ADMIN_KEY``, given to the server as
``MEMFS_ADMIN_KEY``); teardown switches them off before the server stops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import pytest

from kit.mounts import MountedStore, MountMaker

from .helpers import FaultyServer, faulty_server_in


@pytest.fixture
def faulty_server(tmp_path: Path) -> Iterator[FaultyServer]:
    with faulty_server_in(tmp_path) as proc:
        yield proc


@pytest.fixture
def faulty_sdk(faulty_server: FaultyServer) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(
        api_key=faulty_server.api_key, base_url=faulty_server.base_url, max_retries=5
    )
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def faulty_mount(
    faulty_server: FaultyServer, faulty_sdk: anthropic.Anthropic, tmp_path: Path
) -> Iterator[Callable[..., MountedStore]]:
    """``make(*args, memories={...})``: a fresh store mounted through the faulty server, with
    its journal in ``tmp_path/cache`` (``--cache-dir``)."""
    maker = MountMaker.with_cache(faulty_sdk, faulty_server.client_env(), tmp_path, "faults")
    try:
        yield maker
    finally:
        faulty_server.set_faults("none")
        maker.close()
