"""API objects survive a JSON round trip; timestamps parse in every RFC 3339 form."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memfs.api.config import ClientConfig, ConfigError, Secret
from memfs.contract.models import (
    Actor,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    format_time,
    list_item_from_json,
    parse_time,
    sha256_hex,
)

T = datetime(2026, 11, 30, 8, 46, 23, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-30T08:46:23.123456Z",
        "2026-11-30T08:46:23.123456789Z",
        "2026-11-30T09:46:23.123456+01:00",
    ],
)
def test_parse_time_forms(text: str) -> None:
    assert parse_time(text) == T


def test_format_time_is_utc_with_microseconds() -> None:
    assert format_time(T) == "2026-11-30T08:46:23.123456Z"


def test_round_trips() -> None:
    store = MemoryStore("memstore_1", "Demo", "", {"k": "v"}, T, T)
    assert MemoryStore.from_json(store.to_json()) == store
    memory = Memory("mem_1", "memstore_1", "/a.md", sha256_hex("x"), 1, "memver_1", T, T, "x")
    assert Memory.from_json(memory.to_json()) == memory
    assert Memory.from_json(memory.to_json(full=False)).content is None
    version = MemoryVersion(
        "memver_1",
        "mem_1",
        "memstore_1",
        "modified",
        T,
        "/a.md",
        sha256_hex("x"),
        1,
        created_by=Actor("session_actor", "sesn_1"),
        content="x",
    )
    assert MemoryVersion.from_json(version.to_json()) == version
    assert version.to_json()["created_by"] == {"type": "session_actor", "session_id": "sesn_1"}
    assert list_item_from_json({"type": "memory_prefix", "path": "/d/"}) == MemoryPrefix("/d/")


def test_sha256_of_text_is_of_its_utf8_bytes() -> None:
    assert sha256_hex("é") == sha256_hex("é".encode())
    assert sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_secret_never_shows() -> None:
    key = Secret("sk-very-secret")
    assert "sk-very-secret" not in repr(key) and "sk-very-secret" not in str(key)
    config = ClientConfig(api_key=key, base_url="http://x")
    assert "sk-very-secret" not in repr(config)


def test_config_from_env_and_key_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = ClientConfig.from_env(
        env={"ANTHROPIC_API_KEY": "k1", "ANTHROPIC_BASE_URL": "http://h/"}
    )
    assert config.api_key.reveal() == "k1" and config.base_url == "http://h"
    key_file = tmp_path / "key"
    key_file.write_text("\n  k2  \n")
    key_file.chmod(0o600)
    assert ClientConfig.from_env(api_key_file=key_file, env={}).api_key.reveal() == "k2"
    with pytest.raises(ConfigError, match="no API key"):
        ClientConfig.from_env(env={})
    with pytest.raises(ConfigError, match="cannot read"):
        ClientConfig.from_env(api_key_file=tmp_path / "missing", env={})
