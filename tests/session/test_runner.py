"""The runner alone, in this process: a store that cannot be opened when the daemon starts (it
passed the session's checks, then was deleted) is an error in its own directory only; the other
stores are served, and the stop removes the root the runner made.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio

from memfs.contract.models import MemoryStore
from memfs.mount.options import MountOptions
from memfs.session.config import Attachment
from memfs.session.plan import MountPlan
from memfs.session.runner import SessionRunner, StoreAccess, store_spec
from memfs.session.state import SessionState
from memfs.session.teardown import EXIT_FAILED

from .helpers import Api, mounts_under, unique

pytestmark = pytest.mark.fuse


def plan(store: dict[str, Any], root: Path, slug: str, access: str = "read_write") -> MountPlan:
    now = datetime.now(UTC)
    return MountPlan(
        Attachment(store["id"], access, "", 0),  # type: ignore[arg-type]
        MemoryStore(store["id"], store["name"], "", {}, now, now),
        root / slug,
    )


def error_of(call: Callable[[], object]) -> int:
    try:
        call()
    except OSError as exc:
        return exc.errno or 0
    return 0


async def test_a_store_deleted_after_the_checks_fails_in_its_directory_only(
    tmp_path: Path, root: Path, server: Any, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    key_file = tmp_path / "key"
    key_file.write_text(server.api_key)
    key_file.chmod(0o600)
    real = api.create_store(unique("Real"))
    gone = {"id": "memstore_deletedmeanwhile", "name": "Gone"}
    plans = [plan(real, root, "real"), plan(gone, root, "gone", "read_only")]
    access = StoreAccess(api_key_file=str(key_file), base_url=server.base_url)
    options = MountOptions(
        store="",
        mountpoint=str(root),
        stores=tuple(store_spec(p, "sesn_runnertest", access) for p in plans),
        cache_dir=str(tmp_path / "cache"),
    )
    state_file = tmp_path / "state" / "session.json"
    runner = SessionRunner(plans, options, session_id="sesn_runnertest", state_file=state_file)
    served = trio.Event()
    seen: dict[str, object] = {}

    async def use_then_stop() -> None:
        await served.wait()
        # the mount is served by this very process: every syscall on it from a worker thread
        seen["listing"] = sorted(await trio.to_thread.run_sync(os.listdir, root))
        seen["gone"] = await trio.to_thread.run_sync(error_of, lambda: os.listdir(root / "gone"))
        await trio.to_thread.run_sync((root / "real" / "kept.md").write_text, "served\n")
        os.kill(os.getpid(), signal.SIGTERM)  # as `memfs session stop` does

    async with trio.open_nursery() as nursery:
        nursery.start_soon(use_then_stop)
        code = await runner.run(ready=served.set)
    assert seen == {"listing": ["gone", "real"], "gone": errno.EIO}
    assert api.memories(real["id"])["/kept.md"]["content"] == "served\n"
    assert mounts_under(root) == []
    assert not root.exists()  # created by the runner, so removed by it
    # the stop says so (exit status 1), and `memfs session stop` would print it
    assert code == EXIT_FAILED
    state = SessionState.read(state_file)
    assert state is not None and state.status == "stopped"
    assert state.problems == [
        f"{root / 'gone'}: never served: memory store 'memstore_deletedmeanwhile' not found; "
        "`memfs stores list` lists them"
    ]
    state_file.unlink()
