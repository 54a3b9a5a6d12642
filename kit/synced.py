"""Real ``memfs sync`` runs for tests: ``SyncedDir`` (a store, a local directory kept in step
with it by a detached ``memfs sync``, helpers to check both sides) and ``SyncMaker`` (makes them
on one server; ``close()`` stops every sync it started, even when a test failed).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic

from kit.mounts import StoreSide, daemon_alive, memfs, new_store
from kit.waiting import wait_for


@dataclass
class SyncedDir(StoreSide):
    """A store and the directory ``path`` that ``memfs sync`` keeps in step with it."""

    def start(self, *args: str) -> Any:
        """``memfs sync STORE DIR --detach``: returns once DIR is in step."""
        result = memfs(
            "sync",
            self.store_id,
            str(self.path),
            "--detach",
            "--log-file",
            str(self.log_file),
            *self.extra_args,
            *args,
            env=self.env,
        )
        if result.returncode == 0:
            self.pid = self._pid()
        return result

    def once(self, *args: str) -> Any:
        """``memfs sync STORE DIR --once --json``: both ways, then exit."""
        return memfs(
            "sync",
            self.store_id,
            str(self.path),
            "--once",
            "--json",
            "--log-file",
            str(self.log_file),
            *self.extra_args,
            *args,
            env=self.env,
        )

    def stop(self) -> Any:
        """``memfs sync --stop DIR --json``: uploads what is pending, prints the report."""
        result = memfs("sync", "--stop", str(self.path), "--json", env=self.env)
        if self.pid is not None:
            wait_for(lambda: not daemon_alive(self.pid or 0), timeout=10)
        self.pid = None
        return result

    def kill(self) -> None:
        """``kill -9`` the sync (what the core journaled stays in its journal)."""
        assert self.pid is not None
        os.kill(self.pid, signal.SIGKILL)
        wait_for(lambda: not daemon_alive(self.pid or 0), timeout=10)
        self.pid = None

    def _pid(self) -> int | None:
        from memfs.mount.statedir import state_path

        try:
            return int(state_path(str(self.path), "pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def status(self) -> dict[str, Any]:
        """``memfs status DIR --json``."""
        result = memfs("status", str(self.path), "--json", env=self.env)
        assert result.returncode == 0, result.stderr
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def cleanup(self) -> None:
        """Stop the sync whatever state the test left (never raises)."""
        if self.pid is not None and daemon_alive(self.pid):
            with contextlib.suppress(Exception):
                memfs("sync", "--stop", str(self.path), env=self.env, timeout=40)
        if self.pid is not None and daemon_alive(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    # -- both sides -----------------------------------------------------------------------------

    def local(self, path: str) -> Path:
        return self.path / path.lstrip("/")

    def wait_local(self, path: str, content: str | None, timeout: float = 10.0) -> None:
        """Wait until DIR has ``content`` at ``path`` (None: no file there)."""

        def there() -> bool:
            try:
                return self.local(path).read_text() == content
            except FileNotFoundError:
                return content is None

        wait_for(there, timeout=timeout)

    def wait_for_log(self, text: str, timeout: float = 10.0) -> None:
        """Wait until the sync's log holds ``text``."""
        wait_for(lambda: text in self.log(), timeout=timeout)

    def pass_marker(self, name: str = "marker.md") -> None:
        """Write ``name`` in DIR and wait until the store has it: every local change made
        before it has been looked at by then (one pass takes them in order of events). A
        check that something was NOT uploaded waits here."""
        self.local(name).write_text(f"marker {uuid.uuid4().hex}\n")
        text = self.local(name).read_text()
        self.wait_content(f"/{name}", text)


class SyncMaker:
    """Makes ``SyncedDir``s on one server; ``close()`` stops them all and fails if a sync
    logged a traceback."""

    def __init__(self, sdk: anthropic.Anthropic, env: dict[str, str], tmp_path: Path) -> None:
        self.sdk, self.env, self.tmp_path = sdk, env, tmp_path
        self.made: list[SyncedDir] = []

    def __call__(
        self,
        *args: str,
        store_id: str | None = None,
        start: bool = True,
        memories: dict[str, str] | None = None,
    ) -> SyncedDir:
        store_id, name = new_store(self.sdk, "sync", store_id, memories)
        number = len(self.made)
        synced = SyncedDir(
            path=self.tmp_path / f"synced{number}",
            store_id=store_id,
            store_name=name,
            sdk=self.sdk,
            env=self.env,
            log_file=self.tmp_path / f"synced{number}.log",
            extra_args=["--cache-dir", str(self.tmp_path / "cache"), *args],
        )
        self.made.append(synced)
        if start:
            result = synced.start()
            assert result.returncode == 0, f"sync failed: {result.stderr}\n{synced.log()}"
        return synced

    def close(self) -> None:
        for synced in self.made:
            synced.cleanup()
        for synced in self.made:
            log = synced.log()
            assert "Traceback" not in log, f"the sync logged a traceback:\n{log}"
