"""What the Databricks Agent Memory tests import (fixtures live in conftest.py, never imported)."""

from __future__ import annotations

import uuid


def new_store_id() -> str:
    """A store name no other test uses (stores outlive a test only when it fails)."""
    return "t" + uuid.uuid4().hex[:12]
