"""The reference server's fault mode, seen by our own client over real HTTP."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from kit.servers import ServerProcess, free_port
from memfs.api import StoreClient
from memfs.api.config import ClientConfig
from memfs.contract.errors import ApiConnectionError, RateLimitError
from memfs.contract.retry import RetryPolicy
from memfs.server.http.faults import FaultSpec, FaultSpecError

from .helpers import ADMIN_KEY


def client_for(server: Any, **options: Any) -> StoreClient:
    config = ClientConfig.from_env(env=server.client_env(), **options)
    return StoreClient(config, retry=RetryPolicy(base_delay=0.01, max_delay=0.05))


def test_spec_round_trip_and_errors() -> None:
    spec = FaultSpec.parse("latency=0.05, drop=0.1, methods=POST+delete, seed=3")
    assert spec.latency == 0.05 and spec.drop == 0.1 and spec.methods == {"POST", "DELETE"}
    assert FaultSpec.parse(str(spec)) == spec
    assert str(FaultSpec.parse("none")) == "none"
    for bad in ("drop=2", "nonsense=1", "latency=abc", "drop"):
        with pytest.raises(FaultSpecError):
            FaultSpec.parse(bad)
    # Non-finite or negative numbers would hold requests forever or mean nothing.
    for bad in ("latency=inf", "latency=nan", "retry_after=-1", "drop=nan", "outage=maybe"):
        setting = bad.partition("=")[0]
        with pytest.raises(FaultSpecError, match=f"invalid value for {setting}"):
            FaultSpec.parse(bad)


async def test_latency_and_outage(faulty_server: Any) -> None:
    async with client_for(faulty_server, max_retries=0, timeout=5.0) as client:
        store = await client.create_store(name="faults")
        faulty_server.set_faults("latency=0.2")
        started = time.monotonic()
        await client.get_store(store.id)
        assert time.monotonic() - started >= 0.2
        faulty_server.set_faults("outage=1")
        with pytest.raises(ApiConnectionError):
            await client.get_store(store.id)
        faulty_server.set_faults("none")
        assert (await client.get_store(store.id)).id == store.id
        assert faulty_server.faults()["counts"] == {"outage": 1}


async def test_rate_limit_carries_retry_after(faulty_server: Any) -> None:
    async with client_for(faulty_server, max_retries=0) as client:
        store = await client.create_store(name="faults")
        faulty_server.set_faults("rate_limit=1,retry_after=7")
        with pytest.raises(RateLimitError):
            await client.get_store(store.id)
        faulty_server.set_faults("none")


async def test_lost_answers_of_creates_make_no_duplicates(faulty_server: Any) -> None:
    async with client_for(faulty_server, max_retries=6) as client:
        store = await client.create_store(name="faults")
        faulty_server.set_faults("drop_after=0.3,error=0.1,methods=POST,seed=7")
        for n in range(20):
            await client.create_memory(store.id, f"/m{n}.md", f"content {n}")
        counts = faulty_server.faults()["counts"]
        faulty_server.set_faults("none")
        assert counts.get("drop_after", 0) > 0  # the fault really happened
        paths = [m.path async for m in client.list_memories(store.id, limit=100)]
        assert sorted(paths) == sorted(f"/m{n}.md" for n in range(20))


def test_admin_endpoint_takes_the_admin_key_and_refuses_bad_specs(faulty_server: Any) -> None:
    url = faulty_server.base_url + "/v1/memfs/faults"
    for spec in ("drop=9", "latency=inf", "latency=-1"):
        response = httpx.put(url, json={"spec": spec}, headers={"x-api-key": ADMIN_KEY})
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"
        assert spec.partition("=")[0] in response.json()["error"]["message"]
    unauthenticated = httpx.get(url)
    assert unauthenticated.status_code == 401
    tenant = httpx.put(url, json={"spec": "outage=1"}, headers={"x-api-key": faulty_server.api_key})
    assert tenant.status_code == 403
    assert tenant.json()["error"]["type"] == "permission_error"
    assert faulty_server.faults()["spec"] == "none"


def test_fault_control_is_off_for_tenants_without_an_admin_key(tmp_path: Path) -> None:
    """``--faults none`` and no admin key: no API key can start an outage or hang requests."""
    server = ServerProcess(
        db=tmp_path / "off.db", port=free_port(), extra_args=["--faults", "none"]
    )
    server.start()
    try:
        url = server.base_url + "/v1/memfs/faults"
        for spec in ("outage=1", "latency=inf"):
            response = httpx.put(url, json={"spec": spec}, headers={"x-api-key": server.api_key})
            assert response.status_code == 404, response.text
            assert "no admin key" in response.json()["error"]["message"]
        headers = {"x-api-key": server.api_key}
        stores = httpx.get(server.base_url + "/v1/memory_stores", headers=headers)
        assert stores.status_code == 200  # and nothing was switched on
    finally:
        server.stop()


def test_admin_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "admin.key"
    key_file.write_text(ADMIN_KEY + "\n")
    key_file.chmod(0o600)
    server = ServerProcess(
        db=tmp_path / "keyfile.db",
        port=free_port(),
        extra_args=["--faults", "none", "--admin-key-file", str(key_file)],
    )
    server.start()
    try:
        url = server.base_url + "/v1/memfs/faults"
        response = httpx.put(url, json={"spec": "latency=0.01"}, headers={"x-api-key": ADMIN_KEY})
        assert response.status_code == 200 and response.json()["spec"] == "latency=0.01"
    finally:
        server.stop()
