"""How a session reaches each of its stores: ``StoreAccess`` (the credentials every store of
one API shares) and ``store_spec`` (one store as a mount daemon serves it, or a sync keeps it).
Light: a synced session uses it where pyfuse3 is not installed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from memfs.mount.options import StoreSpec
from memfs.session.plan import MountPlan


@dataclass(frozen=True)
class StoreAccess:
    """How the session reaches its stores, the same for every store of one API: the Memory
    Stores key file and base URL (None: the environment's), the Databricks profile (None:
    ``DATABRICKS_HOST``/``DATABRICKS_TOKEN``), and whether an earlier memfs's journal, which
    recorded no server, is replayed (``memfs mount --replay-legacy-journal``)."""

    api_key_file: str | None = None
    base_url: str | None = None
    profile: str | None = None
    replay_legacy_journal: bool = False


def store_spec(plan: MountPlan, session_id: str, access: StoreAccess) -> StoreSpec:
    """One store of the session as the daemon serves it: the directory of its slug, reached
    through its own API (a Memory Stores store's writes attributed to ``session_id``, a
    Databricks store's entries those of its actor and session)."""
    attachment = plan.attachment
    spec = StoreSpec(
        slug=plan.slug,
        store=plan.store.id,
        read_only=plan.read_only,
        replay_legacy_journal=access.replay_legacy_journal,
    )
    if attachment.databricks:
        return dataclasses.replace(
            spec,
            api="databricks",
            actor=attachment.actor_id,
            dbx_session=attachment.session_id,
            profile=access.profile,
        )
    return dataclasses.replace(
        spec, api_key_file=access.api_key_file, base_url=access.base_url, session_id=session_id
    )
