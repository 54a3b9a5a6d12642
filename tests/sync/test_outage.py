"""``memfs sync`` while the server is away: local writes wait (journaled) and reach the store
when it is back; nothing crashes, nothing is lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from kit.servers import ServerProcess
from kit.synced import SyncMaker


@pytest.fixture
def own_server_syncs(
    fresh_server: ServerProcess, tmp_path: Path
) -> Iterator[tuple[ServerProcess, SyncMaker]]:
    sdk = anthropic.Anthropic(
        api_key=fresh_server.api_key, base_url=fresh_server.base_url, max_retries=1
    )
    env = fresh_server.client_env()
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    maker = SyncMaker(sdk, env, tmp_path)
    try:
        yield fresh_server, maker
    finally:
        maker.close()
        sdk.close()


def test_writes_made_while_the_server_is_away_arrive_when_it_is_back(
    own_server_syncs: tuple[ServerProcess, SyncMaker],
) -> None:
    server, make = own_server_syncs
    synced = make(memories={"/a.md": "v1\n"})
    server.stop()
    synced.local("/a.md").write_text("edited while away\n")
    synced.local("/new.md").write_text("made while away\n")
    synced.wait_for_log("failed (attempt")  # handed to the core, whose uploads meet the outage
    server.start()
    synced.wait_content("/a.md", "edited while away\n", timeout=20)
    synced.wait_content("/new.md", "made while away\n", timeout=20)
    assert synced.stop().returncode == 0
