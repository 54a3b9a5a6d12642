"""PostgreSQL restarting under a real ``memfs server``: 503 with ``retry-after`` while it is
down (one log line, no traceback, never a 500), served again as soon as it is back.

The cluster is this test's own (``own_pg_cluster``): the session's is shared by other tests.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from kit.pgcluster import PgCluster
from kit.servers import ServerProcess, free_port


def test_a_restarting_postgresql_is_503_with_retry_after(
    own_pg_cluster: PgCluster, tmp_path: Path
) -> None:
    server = ServerProcess(
        db=tmp_path / "restart.db", port=free_port(), db_url=own_pg_cluster.create_database()
    )
    with (
        server,
        httpx.Client(
            base_url=server.base_url, headers={"x-api-key": server.api_key}, timeout=30
        ) as http,
    ):
        store_id = http.post("/v1/memory_stores", json={"name": "restart"}).json()["id"]
        memories = f"/v1/memory_stores/{store_id}/memories"
        assert http.post(memories, json={"path": "/before", "content": "1"}).status_code == 200
        own_pg_cluster.shut_down()
        r = http.post(memories, json={"path": "/during", "content": "2"})
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "2"
        assert r.json()["error"] == {
            "type": "api_error",
            "message": "the database is unavailable; retry later",
        }
        own_pg_cluster.start_again()
        r = http.post(memories, json={"path": "/after", "content": "3"})
        assert r.status_code == 200, r.text
        listed = http.get(memories).json()["data"]
        assert sorted(m["path"] for m in listed) == ["/after", "/before"]
        assert server.log_path is not None
        log = server.log_path.read_text()
    outage = [line for line in log.splitlines() if "database cannot be reached" in line]
    assert len(outage) == 1 and " WARNING memfs.server.db.availability: " in outage[0], log
    assert "answers again" in log
    assert "Traceback" not in log and "unexpected error" not in log
    assert "psycopg.pool" not in log  # its two-line warnings at every reconnect attempt
    assert sum("change listener lost" in line for line in log.splitlines()) <= 1
