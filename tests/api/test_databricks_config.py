"""``resolve_workspace`` reads a plain host and token without databricks-sdk, exactly as the SDK
would resolve them, and hands everything else to the SDK."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from databricks.sdk.config import Config

from memfs.api.config import ConfigError
from memfs.api.databricks.config import SDK_VARIABLES, _plain_workspace, resolve_workspace

TOKEN = "dapi-config-test-" + "d" * 20


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of its own and no variable the SDK reads; the SDK's probe of the host's metadata
    (a network request, best effort) skipped."""
    for name in SDK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(Config, "_resolve_host_metadata", lambda self: None)
    return tmp_path


def test_the_variables_are_the_sdks() -> None:
    """Every variable the installed SDK reads is one that sends the resolution to it."""
    names = set()
    for attribute in Config.attributes():
        names |= {attribute.env, *attribute.env_aliases} - {None}
    assert names == SDK_VARIABLES


def sdk(profile: str | None) -> tuple[str, str]:
    """The host and personal access token the SDK resolves."""
    config = Config(profile=profile)
    assert config.auth_type == "pat"
    return config.host, config.token


@pytest.mark.parametrize(
    "host",
    ["https://dbc-1.example.com", "dbc-1.example.com", "https://dbc-1.example.com:443/",
     "http://127.0.0.1:8700/", "https://dbc-1.example.com/some/path//"],
)  # fmt: skip
def test_host_and_token_from_the_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    # a DEFAULT profile the SDK skips when the environment names a host: so do we
    (home / ".databrickscfg").write_text("[DEFAULT]\nhost = https://other\ntoken = other\n")
    monkeypatch.setenv("DATABRICKS_HOST", host)
    monkeypatch.setenv("DATABRICKS_TOKEN", TOKEN)
    plain = _plain_workspace(None, os.environ)
    assert plain is not None and plain[:2] == sdk(None)
    workspace = resolve_workspace()
    assert workspace.fresh_headers is None
    assert workspace.config.api_key.reveal() == TOKEN
    assert workspace.config.base_url == plain[0].rstrip("/")


@pytest.mark.parametrize("profile", ["work", None])
def test_host_and_token_of_a_profile(home: Path, profile: str | None) -> None:
    config = home / ".databrickscfg"
    section = profile or "DEFAULT"
    default = "" if profile is None else "[DEFAULT]\nhost = https://default\ntoken = t0\n\n"
    config.write_text(f"{default}[{section}]\nhost = dbc-2.example.com:443\ntoken = {TOKEN}\n")
    config.chmod(0o600)
    plain = _plain_workspace(profile, os.environ)
    assert plain is not None and plain[:2] == sdk(profile) == ("https://dbc-2.example.com", TOKEN)
    assert plain[2] == f"profile {section!r} of ~/.databrickscfg"
    config.chmod(0o644)  # a token others may read is refused, the SDK's way or ours
    if profile is None:  # the DEFAULT profile the SDK falls back to: never checked
        assert resolve_workspace(profile).config.api_key.reveal() == TOKEN
        return
    with pytest.raises(ConfigError, match="open to other users"):
        resolve_workspace(profile)


@pytest.mark.parametrize(
    ("variables", "profile_text", "profile"),
    [
        # another variable the SDK reads: it decides (here: two ways to authenticate)
        ({"DATABRICKS_HOST": "h", "DATABRICKS_TOKEN": "t", "DATABRICKS_CLIENT_ID": "c"}, "", None),
        (
            {"DATABRICKS_HOST": "h", "DATABRICKS_TOKEN": "t", "DATABRICKS_AUTH_TYPE": "pat"},
            "",
            None,
        ),
        ({"DATABRICKS_HOST": "h"}, "", None),  # no token: OAuth, a metadata service...
        ({"DATABRICKS_TOKEN": "t"}, "", None),
        ({"DATABRICKS_CONFIG_PROFILE": "work"}, "[work]\nhost = h\ntoken = t\n", None),
        (
            {"DATABRICKS_HOST": "h", "DATABRICKS_TOKEN": "t"},
            "[work]\nhost = h\ntoken = t\n",
            "work",
        ),
        # a profile with anything but a host and a token, or none
        ({}, "[work]\nhost = h\ntoken = t\nauth_type = pat\n", "work"),
        ({}, "[work]\nhost = h\nclient_id = c\nclient_secret = s\n", "work"),
        ({}, "[work]\nhost = h\ntoken =\n", "work"),
        ({}, "[work]\nhost = h\ntoken = t\n", "other"),
        ({}, "[DEFAULT]\ntoken = t\n[work]\nhost = h\n", "work"),  # the SDK inherits nothing
        ({}, "[__settings__]\ndefault_profile = work\n[work]\nhost = h\ntoken = t\n", None),
        ({}, "[work]\nhost = h\nhost = again\n", "work"),  # unreadable
        ({}, None, "work"),  # no file
        ({}, None, None),
    ],
)
def test_everything_else_is_the_sdks(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    profile_text: str | None,
    profile: str | None,
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    if profile_text is not None:
        (home / ".databrickscfg").write_text(profile_text)
    assert _plain_workspace(profile, os.environ) is None


def test_a_plain_workspace_never_imports_the_sdk(tmp_path: Path) -> None:
    """The point of it: ~60 MB and seconds of CPU a mount or a session does not pay."""
    env = {k: v for k, v in os.environ.items() if k not in SDK_VARIABLES}
    env |= {
        "HOME": str(tmp_path),
        "DATABRICKS_HOST": "http://127.0.0.1:1",
        "DATABRICKS_TOKEN": TOKEN,
    }
    code = (
        "import sys; from memfs.api.databricks import open_store, resolve_workspace; "
        "assert resolve_workspace().config.base_url == 'http://127.0.0.1:1'; "
        "print(sorted(m for m in sys.modules if m.startswith('databricks')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout == "[]\n"
