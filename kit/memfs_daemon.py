"""A mount of several stores in one daemon, for tests: ``SeveralStores`` runs
``memfs.mount.daemon.run_foreground`` with ``MountOptions(stores=...)`` in a subprocess
(``python -m kit.memfs_daemon mount ROOT OPTIONS_JSON LOG``: a command line that
``memfs umount ROOT`` recognises as the daemon of ROOT, as it does ``memfs mount``'s), waits
for its "ok", and ``close()`` always unmounts (``memfs umount``, then ``fusermount3 -uz`` and
killing the daemon).

Each store is a ``StoreSpec`` as JSON (``slug``, ``store``, ``api``, ``base_url``,
``api_key_file``, ``actor``, ``read_only``); the subprocess's environment carries what the
Databricks stores read (``DATABRICKS_HOST``, ``DATABRICKS_TOKEN``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from kit.mounts import _dead_mount, daemon_alive, memfs
from kit.waiting import wait_for

READY_TIMEOUT = 30.0


class SeveralStores:
    """A running daemon serving ``stores`` at ``root`` (module docstring)."""

    def __init__(
        self,
        root: Path,
        stores: list[dict[str, Any]],
        *,
        env: dict[str, str],
        log_file: Path,
        **options: Any,
    ) -> None:
        self.root, self.env, self.log_file = root, env, log_file
        self.document = {"mountpoint": str(root), "stores": stores, **options}
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kit.memfs_daemon",
                "mount",
                str(self.root),
                json.dumps(self.document),
                str(self.log_file),
            ],
            env=self.env | {"PYTHONPATH": _pythonpath(self.env)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        answer = self.proc.stdout.readline().strip()
        assert answer == "ok", f"the daemon answered {answer!r}:\n{self.log()}"
        wait_for(lambda: os.path.ismount(self.root), timeout=READY_TIMEOUT)

    def log(self) -> str:
        try:
            return self.log_file.read_text()
        except OSError:
            return ""

    def umount(self) -> subprocess.CompletedProcess[str]:
        result = memfs("umount", str(self.root), env=self.env)
        wait_for(lambda: not os.path.ismount(self.root), timeout=10)
        return result

    def close(self) -> None:
        """Unmount whatever state the test left (never raises)."""
        if os.path.ismount(self.root):
            with contextlib.suppress(subprocess.TimeoutExpired):
                memfs("umount", str(self.root), env=self.env, timeout=40)
        if os.path.ismount(self.root) or _dead_mount(self.root):
            subprocess.run(["fusermount3", "-uz", str(self.root)], capture_output=True)
        if self.proc is not None:
            if daemon_alive(self.proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def _pythonpath(env: dict[str, str]) -> str:
    here = str(Path(__file__).resolve().parent.parent)  # the repository, for ``kit``
    return os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)


def main(document: str, log_file: str) -> int:
    from memfs.mount.daemon import run_foreground
    from memfs.mount.options import MountOptions, StoreSpec

    logging.basicConfig(
        filename=log_file,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    options = json.loads(document)
    stores = tuple(StoreSpec(**store) for store in options.pop("stores"))
    mount_options = MountOptions(store="", stores=stores, **options)

    def ready(message: str) -> None:
        print(message, flush=True)

    return run_foreground(mount_options, ready)


if __name__ == "__main__":
    sys.exit(main(sys.argv[3], sys.argv[4]))
