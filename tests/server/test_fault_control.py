"""Fault control (``/v1/memfs/faults``): the admin key alone may use it, and it checks its input.

In-process, on SQLite only: nothing here depends on the storage backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.http.faults import FaultMiddleware

from .helpers import KEY, OTHER, assert_error, make_client

ADMIN = "sk-inproc-admin-" + "c" * 24
FAULTS = "/v1/memfs/faults"


async def faulty_app(tmp_path: Path, admin_key: str | None) -> tuple[Any, SqliteStorage]:
    storage = await SqliteStorage.open(tmp_path / "memfs.db")
    app = create_app(
        storage, [KEY, OTHER], fault_middleware=FaultMiddleware.factory(), admin_key=admin_key
    )
    return app, storage


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[Any]:
    app, storage = await faulty_app(tmp_path, ADMIN)
    try:
        yield app
    finally:
        await storage.aclose()


async def test_only_the_admin_key_switches_faults(app: Any) -> None:
    async with make_client(app, key=None) as anon:
        outage = {"spec": "outage=1"}
        r = await anon.put(FAULTS, json=outage)
        assert_error(r, 401, "authentication_error", "missing admin key")
        r = await anon.put(FAULTS, json=outage, headers={"x-api-key": "sk-wrong"})
        assert_error(r, 401, "authentication_error", "admin key")
        for key in (KEY, OTHER):
            r = await anon.put(FAULTS, json=outage, headers={"x-api-key": key})
            assert_error(r, 403, "permission_error", "needs the admin key")
            r = await anon.get(FAULTS, headers={"authorization": f"Bearer {key}"})
            assert_error(r, 403, "permission_error")
        both = [("x-api-key", ADMIN), ("authorization", f"Bearer {KEY}")]
        r = await anon.put(FAULTS, json=outage, headers=both)
        assert_error(r, 401, "authentication_error", "different credentials")
        assert ADMIN not in r.text
        # Nothing was switched: tenants are served.
        r = await anon.get("/v1/memory_stores", headers={"x-api-key": KEY})
        assert r.status_code == 200
        r = await anon.put(FAULTS, json={"spec": "latency=0.01"}, headers={"x-api-key": ADMIN})
        assert r.status_code == 200 and r.json()["spec"] == "latency=0.01"
        r = await anon.get(FAULTS, headers={"authorization": f"Bearer {ADMIN}"})
        assert r.status_code == 200 and r.json()["spec"] == "latency=0.01"
        # The admin key is no API key.
        r = await anon.get("/v1/memory_stores", headers={"x-api-key": ADMIN})
        assert_error(r, 401, "authentication_error")


async def test_fault_control_is_off_without_an_admin_key(tmp_path: Path) -> None:
    app, storage = await faulty_app(tmp_path, None)
    try:
        async with make_client(app) as client:
            r = await client.put(FAULTS, json={"spec": "latency=inf"})
            assert_error(r, 404, "not_found_error", "no admin key")
            assert_error(await client.get(FAULTS), 404, "not_found_error", "MEMFS_ADMIN_KEY")
            assert (await client.get("/v1/memory_stores")).status_code == 200
    finally:
        await storage.aclose()


async def test_bad_specs_are_400s_naming_the_setting(app: Any) -> None:
    async with make_client(app, key=ADMIN) as admin:
        for body, message in (
            ({"spec": "latency=inf"}, "latency"),
            ({"spec": "latency=nan"}, "latency"),
            ({"spec": "latency=-1"}, "latency"),
            ({"spec": "latency=1e9"}, "latency"),
            ({"spec": "retry_after=Infinity"}, "retry_after"),
            ({"spec": "drop=2"}, "drop"),
            ({"spec": "error=-0.5"}, "error"),
            ({"spec": "outage=maybe"}, "outage"),
            ({"spec": "seed=" + "1" * 5000}, "seed"),
            ({"spec": "nonsense=1"}, "nonsense"),
            ({"spec": 5}, "spec: expected a string"),
            ({"spec": "none", "other": 1}, "unknown field 'other'"),
            ({}, "spec: required"),
        ):
            r = await admin.put(FAULTS, json=body)
            assert_error(r, 400, "invalid_request_error", message)
        r = await admin.put(FAULTS, content=b'{"spec": NaN}')
        assert_error(r, 400, "invalid_request_error", "NaN is not a JSON value")
        r = await admin.put(FAULTS, content=b"\xff")
        assert_error(r, 400, "invalid_request_error", "UTF-8")
        assert_error(await admin.delete(FAULTS), 405, "invalid_request_error", "GET or PUT")
        assert (await admin.get(FAULTS)).json()["spec"] == "none"


async def test_the_admin_key_must_differ_from_the_api_keys(tmp_path: Path) -> None:
    storage = await SqliteStorage.open(tmp_path / "memfs.db")
    try:
        with pytest.raises(ValueError, match="admin key must differ"):
            create_app(storage, [KEY, OTHER], admin_key=OTHER)
    finally:
        await storage.aclose()
