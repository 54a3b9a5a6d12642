"""A real reference server in a subprocess (``memfs server``) on a temp database.

API keys travel by environment variable only, never argv.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from kit.waiting import wait_for

TEST_KEY = "sk-memfs-test-" + "k" * 24
OTHER_KEY = "sk-memfs-other-" + "o" * 24


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """A ``memfs server`` subprocess on a temp database."""

    db: Path
    port: int
    keys: list[str] = field(default_factory=lambda: [TEST_KEY, OTHER_KEY])
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    db_url: str | None = None  # a postgresql:// URL to serve instead of the file ``db``
    log_path: Path | None = None  # the server's output; by default next to ``db``
    admin_key: str | None = None  # MEMFS_ADMIN_KEY of the server (fault control), never argv

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_key(self) -> str:
        return self.keys[0]

    def client_env(self) -> dict[str, str]:
        """Environment for a client process (CLI, mount daemon) talking to this server."""
        env = dict(os.environ)
        env["ANTHROPIC_BASE_URL"] = self.base_url
        env["ANTHROPIC_API_KEY"] = self.api_key
        env.pop("MEMFS_API_KEYS", None)
        env.pop("MEMFS_ADMIN_KEY", None)
        return env

    def start(self) -> None:
        env = dict(os.environ)
        env["MEMFS_API_KEYS"] = ",".join(self.keys)
        env.pop("MEMFS_ADMIN_KEY", None)
        if self.admin_key is not None:
            env["MEMFS_ADMIN_KEY"] = self.admin_key
        if self.log_path is None:
            self.log_path = self.db.with_suffix(".log")
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the subprocess
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memfs",
                "server",
                "--db",
                self.db_url or str(self.db),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *self.extra_args,
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        wait_for(self._healthy, timeout=20)

    def _healthy(self) -> bool:
        assert self.proc is not None and self.log_path is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
        try:
            return httpx.get(self.base_url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def __enter__(self) -> ServerProcess:
        """``with ServerProcess(...) as proc``: started, and stopped on the way out."""
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def restart(self) -> None:
        self.stop()
        self.start()


@asynccontextmanager
async def served_in_process(storage: Any, keys: list[str]) -> AsyncIterator[str]:
    """The reference server's app on ``storage`` over real HTTP, in this process (trio), for a
    test that needs what ``memfs server`` has no option for (a storage's limits); yields its
    base URL and stops serving on the way out (the storage stays the caller's to close)."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from memfs.server.app import create_app

    config = Config()
    config.bind = [f"127.0.0.1:{free_port()}"]
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        app = create_app(storage, keys)
        await nursery.start(
            partial(serve, app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
        )
        try:
            yield "http://" + config.bind[0]
        finally:
            stop.set()
