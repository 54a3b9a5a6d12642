"""The supervisor alone: a store that cannot be mounted undoes the whole session."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memfs.models import MemoryStore
from memfs.session.plan import Attachment, MountPlan
from memfs.session.supervisor import MountCommand, MountError, Supervisor

from .helpers import Api, mounts_under, unique

pytestmark = pytest.mark.fuse


def plan(store: dict[str, Any], root: Path, slug: str, access: str = "read_write") -> MountPlan:
    now = datetime.now(UTC)
    return MountPlan(
        Attachment(store["id"], access, "", 0),  # type: ignore[arg-type]
        MemoryStore(store["id"], store["name"], "", {}, now, now),
        root / slug,
    )


async def test_a_failed_mount_unmounts_the_others_and_removes_every_directory(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    real = api.create_store(unique("Real"))
    # Deleted between the session's checks and its mounts: `memfs mount` refuses it.
    gone = {"id": "memstore_deletedmeanwhile", "name": "Gone"}
    supervisor = Supervisor(
        [plan(real, root, "real"), plan(gone, root, "gone", "read_only")],
        root=root,
        session_id="sesn_supervisortest",
        state_file=tmp_path / "state" / "session.json",
        command=MountCommand(env=session_env),
    )
    readied = []
    with pytest.raises(MountError) as info:
        await supervisor.run(ready=lambda: readied.append(True))
    assert str(info.value).startswith(
        f"cannot mount memstore_deletedmeanwhile at {root / 'gone'}: "
    )
    assert "not found" in str(info.value)
    assert readied == []
    assert mounts_under(root) == []
    assert not root.exists()
    assert not (tmp_path / "state" / "session.json").exists()
