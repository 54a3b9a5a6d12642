"""Fixtures for fault tests: a private server with the fault middleware installed (no fault yet).

``faulty_server.set_faults(spec)`` switches faults at run time through the admin endpoint
(``memfs.server.faults``); teardown switches them off before the server stops.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import httpx
import pytest
from conftest import ServerProcess, free_port
from mount.conftest import MountedStore


class FaultyServer(ServerProcess):
    def set_faults(self, spec: str) -> dict[str, object]:
        response = httpx.put(
            self.base_url + "/v1/memfs/faults",
            json={"spec": spec},
            headers={"x-api-key": self.api_key},
            timeout=5,
        )
        response.raise_for_status()
        data: dict[str, object] = response.json()
        return data

    def faults(self) -> dict[str, object]:
        response = httpx.get(
            self.base_url + "/v1/memfs/faults", headers={"x-api-key": self.api_key}, timeout=5
        )
        response.raise_for_status()
        data: dict[str, object] = response.json()
        return data


@pytest.fixture
def faulty_server(tmp_path: Path) -> Iterator[FaultyServer]:
    proc = FaultyServer(
        db=tmp_path / "faulty.db", port=free_port(), extra_args=["--faults", "none"]
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


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
    made: list[MountedStore] = []

    def make(*args: str, memories: dict[str, str] | None = None) -> MountedStore:
        store = faulty_sdk.beta.memory_stores.create(name=f"faults-{uuid.uuid4().hex[:8]}")
        for path, content in (memories or {}).items():
            faulty_sdk.beta.memory_stores.memories.create(store.id, path=path, content=content)
        point = tmp_path / f"mnt{len(made)}"
        point.mkdir()
        mounted = MountedStore(
            path=point,
            store_id=store.id,
            store_name=store.name,
            sdk=faulty_sdk,
            env=faulty_server.client_env(),
            log_file=tmp_path / f"mount{len(made)}.log",
            extra_args=["--cache-dir", str(tmp_path / "cache"), *args],
        )
        made.append(mounted)
        result = mounted.mount()
        assert result.returncode == 0, f"mount failed: {result.stderr}\n{mounted.log()}"
        return mounted

    try:
        yield make
    finally:
        faulty_server.set_faults("none")
        for mounted in made:
            mounted.cleanup()
        for mounted in made:
            log = mounted.log()
            assert "Traceback" not in log, f"the daemon logged a traceback:\n{log}"
