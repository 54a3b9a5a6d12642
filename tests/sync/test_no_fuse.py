"""``memfs sync`` where FUSE is not: the real command, as an ordinary user, in a sandbox made to
look like a laptop without FUSE or a container without ``/dev/fuse``:

- run as ``nobody`` (no capabilities, no group), in a mount namespace of its own where
  ``/dev/fuse`` cannot be opened (a root-only file is bound over it);
- pyfuse3 cannot be imported (a meta path finder refuses it, so ``find_spec`` fails too: the
  extra checks see it missing, as on a machine where it was never installed);
- no ``/proc`` (an empty tmpfs over it) and no ``os.fdatasync``: as on macOS, so the portable
  fallbacks (``memfs.host.portable``) are what runs.

Against the session's real server: the first copy, a local write reaching the store, a remote
change reaching DIR, ``memfs status DIR``, then ``memfs sync --stop``; with the platform's file
events and with polling (``--watch poll``, as where there are none).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

import memfs
from kit.planted import NOBODY
from kit.servers import ServerProcess
from kit.synced import SyncedDir
from kit.waiting import wait_for

REPO = Path(memfs.__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent.parent

# Imported by every Python of the sandbox: the platform's differences from this Linux.
NO_FUSE_SITE = '''
import os
import sys


class NoPyfuse3:
    """pyfuse3 is not installed here (find_spec and import both fail)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pyfuse3" or name.startswith("pyfuse3."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoPyfuse3())
del os.fdatasync  # macOS has none
'''

# As root: a mount namespace of its own, /dev/fuse unopenable, no /proc; then nobody.
SANDBOX = (
    'mount --bind "$NO_ACCESS" /dev/fuse && mount -t tmpfs -o mode=0555 none /proc && '
    f'exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups -- "$@"'
)


def _can_sandbox() -> bool:
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in ("unshare", "setpriv"))


pytestmark = pytest.mark.skipif(
    not _can_sandbox(), reason="needs root to make the unprivileged sandbox"
)


class Sandbox:
    """Runs ``memfs`` commands as ``nobody`` without FUSE, pyfuse3 or ``/proc``."""

    def __init__(self, base: Path, env: dict[str, str]) -> None:
        self.base = base
        site = base / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(NO_FUSE_SITE)
        self.no_access = base / "no-access"
        self.no_access.write_text("")
        self.no_access.chmod(0)
        self.home = base / "home"
        self.home.mkdir()
        os.chown(self.home, NOBODY, NOBODY)
        self.env = {
            key: value
            for key, value in env.items()
            if key
            not in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "PYTHONPATH", "COVERAGE_PROCESS_START")
        }
        self.env.update(
            HOME=str(self.home),
            XDG_CACHE_HOME=str(self.home / "cache"),
            PYTHONPATH=os.pathsep.join((str(site), str(REPO), str(TESTS))),
            NO_ACCESS=str(self.no_access),
        )

    def argv(self, *args: str) -> list[str]:
        return [
            "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", SANDBOX, "sh",
            sys.executable, *args,
        ]  # fmt: skip

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), env=self.env, cwd=self.home, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip

    def memfs(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "memfs", *args, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``python -m memfs ...`` in the foreground, as a child of the test (which reaps it:
        without ``/proc`` a zombie looks alive to the one who asks)."""
        return subprocess.Popen(
            self.argv("-m", "memfs", *args), env=self.env, cwd=self.home,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip


@pytest.fixture
def sandbox(shared_dir: Path, server: ServerProcess) -> Sandbox:
    return Sandbox(shared_dir, server.client_env())


@pytest.fixture
def synced(
    sandbox: Sandbox, sdk: anthropic.Anthropic, request: pytest.FixtureRequest
) -> Iterator[SandboxedSync]:
    store = sdk.beta.memory_stores.create(name=f"no-fuse-{uuid.uuid4().hex[:10]}")
    synced = SandboxedSync(
        path=sandbox.home / "synced",
        store_id=store.id,
        store_name=store.name,
        sdk=sdk,
        env=sandbox.env,
        log_file=sandbox.home / "sync.log",
    )
    synced.sandbox = sandbox
    try:
        yield synced
    finally:
        synced.cleanup()


class SandboxedSync(SyncedDir):
    """A ``SyncedDir`` whose ``memfs sync`` runs in the ``Sandbox``, in the foreground."""

    sandbox: Sandbox
    process: subprocess.Popen[str] | None = None

    def start(self, *args: str) -> Any:
        self.process = self.sandbox.start(
            "sync", self.store_id, str(self.path), "--log-file", str(self.log_file), *args
        )
        self.pid = self.process.pid
        wait_for(lambda: self._started(), timeout=30)
        return self.process

    def _started(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"memfs sync exited: {stderr}\n{self.log()}")
        return "is in step with" in self.log()

    def status(self) -> dict[str, Any]:
        result = self.sandbox.memfs("status", str(self.path), "--json")
        assert result.returncode == 0, result.stderr
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def stop(self) -> Any:
        """``memfs sync --stop DIR --json`` in the sandbox, the sync reaped meanwhile."""
        assert self.process is not None
        stopper = subprocess.Popen(
            self.sandbox.argv("-m", "memfs", "sync", "--stop", str(self.path), "--json"),
            env=self.sandbox.env, cwd=self.sandbox.home, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        code = self.process.wait(timeout=50)
        out, err = stopper.communicate(timeout=20)
        self.process = None
        self.pid = None
        return code, stopper.returncode, out, err

    def cleanup(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(30)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
        # what it left in nobody's state directory (/tmp/memfs-65534/memfs: no XDG_RUNTIME_DIR)
        digest = hashlib.sha1(os.path.realpath(self.path).encode()).hexdigest()[:16]
        for left in Path(f"/tmp/memfs-{NOBODY}/memfs").glob(f"{digest}.*"):
            left.unlink(missing_ok=True)


def test_the_sandbox_has_no_fuse_no_pyfuse3_no_proc_no_root(sandbox: Sandbox) -> None:
    probe = (
        "import os, sys\n"
        "try:\n    os.open('/dev/fuse', os.O_RDWR)\nexcept PermissionError:\n    print('no-fuse')\n"
        "try:\n    import pyfuse3\nexcept ImportError:\n    print('no-pyfuse3')\n"
        "print('no-proc' if not os.path.exists('/proc/self') else 'proc')\n"
        "print('no-fdatasync' if not hasattr(os, 'fdatasync') else 'fdatasync')\n"
        "print(os.getuid())\n"
    )
    done = sandbox.run("-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["no-fuse", "no-pyfuse3", "no-proc", "no-fdatasync", str(NOBODY)]


@pytest.mark.parametrize("watch", ["events", "poll"])
def test_sync_without_fuse_as_an_ordinary_user(synced: SandboxedSync, watch: str) -> None:
    synced.put("/notes/first.md", "from the store\n")
    synced.put("/top.md", "top\n")
    synced.start("--watch", watch)
    assert synced.local("/notes/first.md").read_text() == "from the store\n"
    assert synced.local("/top.md").stat().st_uid == NOBODY

    document = synced.status()  # memfs status DIR, pyfuse3 missing: no mount extra needed
    assert document["sync"]["watcher"] == ("polling" if watch == "poll" else "native")
    assert document["mountpoint"] == str(synced.path)

    # a local write, by the user, reaches the store
    synced.sandbox.run("-c", f"open({str(synced.local('/notes/mine.md'))!r}, 'w').write('mine\\n')")
    synced.wait_content("/notes/mine.md", "mine\n")
    # a remote change reaches DIR
    synced.put("/top.md", "top, changed remotely\n")
    synced.wait_local("/top.md", "top, changed remotely\n")

    code, stop_code, out, err = synced.stop()
    assert (code, stop_code) == (0, 0), err + synced.log()
    report = json.loads(out)
    assert report["sync"]["uploads"] >= 1 and report["sync"]["downloads"] >= 1
    assert "Traceback" not in synced.log()
