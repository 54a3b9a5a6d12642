"""A randomized model test: a mount and a plain local directory, driven side by side.

Hypothesis runs random sequences of open/write/append/truncate/rename/unlink/mkdir/fsync/close,
interleaved with remote edits (through the official SDK) and daemon restarts (clean unmount and
mount, or ``kill -9`` and mount: the journal must replay). After every step the two trees must
agree; at the end the store must hold exactly what was acknowledged (every close that returned
without error).

Short by default (a few examples); ``MEMFS_MODEL_EXAMPLES=200 make soak`` runs longer.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from support.mounts import MountedStore, daemon_alive
from support.waiting import wait_for

pytestmark = [pytest.mark.fuse]

EXAMPLES = int(os.environ.get("MEMFS_MODEL_EXAMPLES", "3"))
STEPS = int(os.environ.get("MEMFS_MODEL_STEPS", "25"))

NAMES = ["a.md", "b.md", "notes.txt", "sub/c.md", "sub/d.md"]
names = st.sampled_from(NAMES)
texts = st.text(alphabet="abcxyz \n", min_size=0, max_size=40)


def tree(root: Path) -> dict[str, str]:
    """relative path -> content of every file below ``root`` (directories end with /)."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel + "/" if path.is_dir() else rel] = "" if path.is_dir() else path.read_text()
    return out


def test_mount_agrees_with_a_local_directory(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    stores: list[MountedStore] = []

    class MountModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.m = mount_factory("--cache-dir", str(cache), "--update-delay", "0.2")
            stores.append(self.m)
            self.local = tmp_path / f"local{len(stores)}"
            self.local.mkdir()

        def both(self, rel: str) -> tuple[Path, Path]:
            return self.m.path / rel, self.local / rel

        def _parent_ok(self, rel: str) -> bool:
            return "/" not in rel or (self.local / rel).parent.is_dir()

        @rule(name=names, text=texts)
        def write(self, name: str, text: str) -> None:
            if not self._parent_ok(name):
                return
            for path in self.both(name):
                with open(path, "w") as handle:
                    handle.write(text)

        @rule(name=names, text=texts)
        def append_and_fsync(self, name: str, text: str) -> None:
            mounted, local = self.both(name)
            if not local.is_file():
                return
            for path in (mounted, local):
                with open(path, "a") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())

        @rule(name=names, size=st.integers(min_value=0, max_value=30))
        def truncate(self, name: str, size: int) -> None:
            mounted, local = self.both(name)
            if not local.is_file():
                return
            for path in (mounted, local):
                os.truncate(path, size)

        @rule(src=names, dst=names)
        def rename(self, src: str, dst: str) -> None:
            mounted, local = self.both(src)
            if not local.is_file() or not self._parent_ok(dst) or src == dst:
                return
            os.rename(mounted, self.m.path / dst)
            os.rename(local, self.local / dst)

        @rule(name=names)
        def unlink(self, name: str) -> None:
            mounted, local = self.both(name)
            if not local.is_file():
                return
            mounted.unlink()
            local.unlink()

        @rule()
        def mkdir(self) -> None:
            if (self.local / "sub").exists():
                return
            (self.m.path / "sub").mkdir()
            (self.local / "sub").mkdir()

        @rule(name=names, text=texts)
        def remote_edit(self, name: str, text: str) -> None:
            local = self.local / name
            if not local.is_file():
                return
            self.m.settle()  # nothing pending locally: the remote edit is not a conflict
            self.m.put("/" + name, text)
            local.write_text(text)
            wait_for(lambda: (self.m.path / name).read_text() == text, timeout=5)

        @rule(name=names)
        def remote_delete(self, name: str) -> None:
            local = self.local / name
            if not local.is_file():
                return
            self.m.settle()
            memory = self.m.memories()["/" + name]
            memories = self.m.sdk.beta.memory_stores.memories
            memories.delete(memory.id, memory_store_id=self.m.store_id)
            local.unlink()
            wait_for(lambda: not (self.m.path / name).exists(), timeout=5)
            self._settle_emptied_sub()

        @rule(src=names, dst=names)
        def remote_rename(self, src: str, dst: str) -> None:
            local = self.local / src
            if not local.is_file() or (self.local / dst).exists() or src == dst:
                return
            self.m.settle()
            memory = self.m.memories()["/" + src]
            self.m.sdk.beta.memory_stores.memories.update(
                memory.id, memory_store_id=self.m.store_id, path="/" + dst
            )
            (self.local / dst).parent.mkdir(exist_ok=True)  # a path makes its directories
            text = local.read_text()
            local.rename(self.local / dst)
            wait_for(lambda: not (self.m.path / src).exists(), timeout=5)
            wait_for(lambda: (self.m.path / dst).read_text() == text, timeout=5)
            self._settle_emptied_sub()

        def _settle_emptied_sub(self) -> None:
            """A remote change emptied ``sub``: it stays if this mount made it or changed
            something in it (kept for rmdir), else it goes with its last memory. Either way
            ``ls`` and ``stat`` must agree; the local side follows what the mount shows."""
            sub = self.local / "sub"
            if sub.is_dir() and not any(sub.iterdir()):
                listed = "sub" in os.listdir(self.m.path)
                assert listed == (self.m.path / "sub").is_dir()
                if not listed:
                    sub.rmdir()

        @rule(kill=st.booleans())
        def restart(self, kill: bool) -> None:
            if kill:
                assert self.m.pid is not None
                os.kill(self.m.pid, signal.SIGKILL)
                wait_for(lambda: not daemon_alive(self.m.pid or 0), timeout=10)
                subprocess.run(["fusermount3", "-uz", str(self.m.path)], check=False)
                wait_for(lambda: not os.path.ismount(self.m.path), timeout=10)
            else:
                assert self.m.umount().returncode == 0
            result = self.m.mount()
            assert result.returncode == 0, result.stderr
            # directories exist through their memories: an empty one is gone after a remount
            sub = self.local / "sub"
            if sub.is_dir() and not any(sub.iterdir()):
                sub.rmdir()

        @invariant()
        def trees_agree(self) -> None:
            assert tree(self.m.path) == tree(self.local)

        def teardown(self) -> None:
            try:
                self.m.settle()
                expected = {
                    "/" + rel: text
                    for rel, text in tree(self.local).items()
                    if not rel.endswith("/")
                }
                stored = {path: self.m.content(path) for path in self.m.paths()}
                assert stored == expected
            finally:
                self.m.cleanup()
                shutil.rmtree(self.local, ignore_errors=True)

    run_state_machine_as_test(
        MountModel,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
