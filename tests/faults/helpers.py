"""A server with the fault middleware: ``FaultyServer.set_faults(spec)`` switches faults at
run time through the admin endpoint with ``ADMIN_KEY`` (``memfs.server.faults``)."""

from __future__ import annotations

import httpx
from support.servers import ServerProcess

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
