"""The reference server's Databricks API as a test arranges and checks data through it."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import httpx

from kit.servers import ServerProcess

ACTOR = "agent-7"
API = "/api/2.0/agents/memory-stores"


def databricks_env(server: ServerProcess, tmp_path: Path) -> dict[str, str]:
    """The environment of a client (``memfs mount --api databricks``) of ``server``'s Databricks
    API: ``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN``, no Anthropic settings, no
    ``~/.databrickscfg`` of the machine's, journals under ``tmp_path``."""
    env = dict(os.environ)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        env.pop(name, None)
    env["DATABRICKS_HOST"] = server.base_url
    env["DATABRICKS_TOKEN"] = server.api_key
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    return env


class Workspace:
    """The server's Databricks API, spoken as any client would (plain HTTP, Bearer token)."""

    def __init__(self, server: ServerProcess) -> None:
        self.token = server.api_key
        self.http = httpx.Client(
            base_url=server.base_url, headers={"authorization": f"Bearer {server.api_key}"}
        )

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def create_store(self) -> str:
        store = f"dbx-{uuid.uuid4().hex[:10]}"
        answer = self.http.post(API, params={"managed_memory_store_id": store}, json={})
        assert answer.status_code == 200, answer.text
        return store

    def put(
        self,
        store: str,
        path: str,
        content: str,
        *,
        actor: str = ACTOR,
        session: str | None = None,
        description: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"actor_id": actor, "path": path, "content": content}
        if session is not None:
            body["session_id"] = session
        if description is not None:
            body["description"] = description
        answer = self.http.post(f"{API}/{store}/entries", json=body)
        assert answer.status_code == 200, answer.text
        entry: dict[str, Any] = answer.json()
        return entry

    def patch(self, store: str, entry: dict[str, Any], content: str) -> None:
        entry_id = entry["name"].rsplit("/", 1)[1]
        answer = self.http.patch(
            f"{API}/{store}/entries/{entry_id}",
            params={"update_mask": "content"},
            json={"content": content},
        )
        assert answer.status_code == 200, answer.text

    def entries(self, store: str, actor: str = ACTOR) -> dict[tuple[str | None, str], Any]:
        """(session, path) -> entry (with content) of every entry of ``actor``."""
        found: dict[tuple[str | None, str], Any] = {}
        token = None
        while True:
            params: dict[str, str | int] = {"actor_id": actor, "page_size": 100}
            if token:
                params["page_token"] = token
            answer = self.http.get(f"{API}/{store}/entries", params=params)
            assert answer.status_code == 200, answer.text
            data = answer.json()
            for entry in data.get("managed_memory_entries", []):
                found[(entry.get("session_id"), entry["path"])] = entry
            token = data.get("next_page_token")
            if not token:
                return found

    def content(self, store: str, path: str, session: str | None = None) -> str | None:
        entry = self.entries(store).get((session, path))
        return None if entry is None else str(entry.get("content", ""))
