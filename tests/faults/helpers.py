"""A server with the fault middleware: ``FaultyServer.set_faults(spec)`` switches faults at
run time through the admin endpoint with ``ADMIN_KEY`` (``memfs.server.http.faults``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx

from kit.servers import ServerProcess, free_port

ADMIN_KEY = "sk-memfs-admin-" + "f" * 24


class FaultyServer(ServerProcess):
    def set_faults(self, spec: str) -> dict[str, object]:
        response = httpx.put(
            self.base_url + "/v1/memfs/faults",
            json={"spec": spec},
            headers={"x-api-key": ADMIN_KEY},
            timeout=5,
        )
        response.raise_for_status()
        data: dict[str, object] = response.json()
        return data

    def faults(self) -> dict[str, object]:
        response = httpx.get(
            self.base_url + "/v1/memfs/faults", headers={"x-api-key": ADMIN_KEY}, timeout=5
        )
        response.raise_for_status()
        data: dict[str, object] = response.json()
        return data


@contextlib.contextmanager
def faulty_server_in(directory: Path) -> Iterator[FaultyServer]:
    """A running server with fault injection (none installed yet: ``set_faults``), its
    database in ``directory``; stopped on the way out."""
    proc = FaultyServer(
        db=directory / "faulty.db",
        port=free_port(),
        extra_args=["--faults", "none"],
        admin_key=ADMIN_KEY,
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
