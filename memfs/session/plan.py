"""Where a session's stores go: the stores as their APIs know them checked, the root checked,
a directory (slug) chosen for each.

Every check runs before anything is mounted, and each problem is one line for a person
(``SessionError``). It must not mount, start processes or touch the network:
``memfs.session.stores`` retrieves the stores given to ``check_stores`` and ``plan_mounts``, the
runner (``memfs.session.runner``) serves them, ``memfs.session.prompt`` writes what an agent
needs to know about them.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memfs.contract.exit_codes import EXIT_NOT_FOUND, EXIT_USAGE
from memfs.contract.models import MemoryStore
from memfs.contract.paths import slug
from memfs.session.config import DATABRICKS, Attachment, SessionError


@dataclass(frozen=True)
class MountPlan:
    """Where and how one attached store is mounted."""

    attachment: Attachment
    store: MemoryStore
    path: Path

    @property
    def slug(self) -> str:
        return self.path.name

    @property
    def read_only(self) -> bool:
        return self.attachment.read_only

    @property
    def described(self) -> str:
        """The store in a message: its id and name, or a Databricks store's actor and session."""
        if self.attachment.databricks:
            return self.attachment.described
        return f"{self.store.id} ({self.store.name!r})"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "memory_store_id": self.store.id,
            "name": self.store.name,
            "path": str(self.path),
            "access": self.attachment.access,
        }
        if self.attachment.databricks:
            found.update(
                api=DATABRICKS,
                actor_id=self.attachment.actor_id,
                session_id=self.attachment.session_id,
            )
        return found


def check_stores(attachments: list[Attachment], stores: dict[str, MemoryStore | None]) -> list[str]:
    """Problems with the stores themselves: unknown, archived but attached read-write."""
    problems = []
    for attachment in attachments:
        store = stores.get(attachment.store_key)
        where = f"resources[{attachment.index}]"
        if store is None:
            kind = "Databricks store" if attachment.databricks else "memory store"
            problems.append(f"{where}: {kind} {attachment.memory_store_id} does not exist")
        elif store.archived and not attachment.read_only:
            problems.append(
                f"{where}: memory store {store.id} ({store.name!r}) is archived and cannot be "
                "attached read_write; attach it read_only"
            )
    return problems


def plan_mounts(
    attachments: list[Attachment], stores: dict[str, MemoryStore | None], root: Path
) -> list[MountPlan]:
    """Check the stores and the root, and say where each store goes.

    A Memory Stores store goes at the slug of its name; a Databricks store at its id, or, when
    it is attached more than once (for other actors or sessions), at the slug of its id, actor
    and session (``notes-agent-7-s1``). Raises SessionError with every problem found. Nothing
    is created or mounted here: the root is the one mount point, the stores' directories are
    the mount's own.
    """
    problems = check_stores(attachments, stores)
    if problems:
        missing = sum(stores.get(a.store_key) is None for a in attachments)
        raise SessionError(problems, EXIT_NOT_FOUND if missing == len(problems) else EXIT_USAGE)
    plans: list[MountPlan] = []
    by_slug: dict[str, MountPlan] = {}
    attached = [a.store_key for a in attachments]
    for attachment in attachments:
        store = stores[attachment.store_key]
        assert store is not None  # check_stores refused unknown stores
        name_slug = slug(store.name)
        if attachment.databricks and attached.count(attachment.store_key) > 1:
            name_slug = slug(
                "-".join(filter(None, (store.id, attachment.actor_id, attachment.session_id)))
            )
        if not name_slug:
            problems.append(
                f"memory store {store.id} is named {store.name!r}, which gives an empty "
                "directory name; rename the store"
            )
            continue
        plan = MountPlan(attachment=attachment, store=store, path=root / name_slug)
        other = by_slug.get(name_slug)
        if other is not None:
            problems.append(
                f"memory stores {other.described} and {plan.described} would both mount at "
                f"{plan.path}; rename one of them"
            )
            continue
        by_slug[name_slug] = plan
        plans.append(plan)
    problems.extend(check_root(root))
    if problems:
        raise SessionError(problems)
    return plans


def check_root(root: Path) -> list[str]:
    """The session root is the mount point: it must not exist yet (the session creates it and
    removes it at the end), or be an empty directory (kept at the end), never a symbolic link
    (the mount would cover wherever it points: one planted by another user could point at any
    empty directory of the machine), nor a mount already."""
    if root.is_symlink():
        return [
            f"session root {root} is a symbolic link; remove it (memfs never mounts through one)"
        ]
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return [f"session root {root} exists and is not a directory"]
    except OSError as exc:
        if exc.errno in (errno.ENOTCONN, errno.ECONNABORTED):
            return [f"session root {root} is a dead mount; unmount it (fusermount3 -uz {root})"]
        return [f"session root {root} is unusable: {exc.strerror}"]
    if os.path.ismount(root):
        return [f"session root {root} is already a mount point"]
    if entries:
        return [f"session root {root} exists and is not empty ({len(entries)} entries)"]
    if not os.access(root, os.W_OK | os.X_OK):
        return [f"session root {root} is not writable"]
    return []
