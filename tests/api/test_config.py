"""``ClientConfig.from_env`` refuses an unusable base URL once, for every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.api.config import (
    DEFAULT_BASE_URL,
    ClientConfig,
    ConfigError,
    Secret,
    check_api_key,
    check_base_url,
    shown_url,
)

ENV = {"ANTHROPIC_API_KEY": "sk-config-test-" + "c" * 20}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8700/", "http://127.0.0.1:8700"),
        ("https://api.anthropic.com", "https://api.anthropic.com"),
        ("  http://[::1]:8700/proxy/ \n", "http://[::1]:8700/proxy"),
    ],
)
def test_good_base_urls(url: str, expected: str) -> None:
    assert check_base_url(url) == expected
    assert ClientConfig.from_env(env={**ENV, "ANTHROPIC_BASE_URL": url}).base_url == expected


@pytest.mark.parametrize(
    "url",
    ["not-a-url", "localhost:8700", "ftp://host", "http://", "http://h:0", "http://h:x",
     "http://[::1", "http://a b.example", "file:///etc/passwd"],
)  # fmt: skip
def test_bad_base_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^invalid ANTHROPIC_BASE_URL "):
        ClientConfig.from_env(env={**ENV, "ANTHROPIC_BASE_URL": url})
    with pytest.raises(ConfigError, match=r"^invalid --base-url "):
        ClientConfig.from_env(env=ENV, base_url=url)


def test_credentials_in_a_bad_url_are_not_repeated() -> None:
    with pytest.raises(ConfigError) as caught:
        check_base_url("http://user:hunter2@:80", "ANTHROPIC_BASE_URL")
    assert "hunter2" not in str(caught.value)
    assert "***@" in str(caught.value)


def test_unset_or_empty_base_url_is_the_hosted_api() -> None:
    assert ClientConfig.from_env(env=ENV).base_url == DEFAULT_BASE_URL
    assert ClientConfig.from_env(env={**ENV, "ANTHROPIC_BASE_URL": ""}).base_url == (
        DEFAULT_BASE_URL
    )


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("sk-a\nhidden", "a line break"),
        ("sk-a\rhidden", "a line break"),
        ("sk-a hidden", "white space"),
        ("sk-a\thidden", "white space"),
        ("sk-a\x7fhidden", "a control character"),
        ("sk-aéhidden", "a non-ASCII character"),
        ("sk-a\u200bhidden", "a non-ASCII character"),  # zero-width space, pasted
    ],
)
def test_keys_that_cannot_travel_in_a_header_are_refused_without_showing_them(
    key: str, what: str
) -> None:
    for make in (
        lambda: ClientConfig.from_env(env={"ANTHROPIC_API_KEY": key}),
        lambda: ClientConfig.from_env(env={"ANTHROPIC_AUTH_TOKEN": key}),
        lambda: ClientConfig(api_key=Secret(key)),  # every source: checked on construction
    ):
        with pytest.raises(ConfigError) as caught:
            make()
        message = str(caught.value)
        assert f"is not a usable API key: it contains {what} (character 5)" in message
        assert "hidden" not in message and "\n" not in message
    assert check_api_key(Secret("sk-ant-api03-Az_09-~.")).reveal() == "sk-ant-api03-Az_09-~."


def test_passwords_in_base_urls_are_masked_everywhere_they_show() -> None:
    assert shown_url("http://user:hunter2@host:8700/p?q") == "http://user:***@host:8700/p?q"
    assert shown_url("https://token@host") == "https://***@host"
    assert shown_url("http://host/a@b") == "http://host/a@b"  # an @ in the path is no userinfo
    assert shown_url("not a url") == "not a url"
    config = ClientConfig(api_key=Secret("sk-key-" + "k" * 20), base_url="http://u:hunter2@h")
    assert "hunter2" not in repr(config) and config.shown_base_url == "http://u:***@h"
    quoted = config.hide_secrets(f"error at http://u:hunter2@h/x with {config.api_key.reveal()}")
    assert quoted == "error at http://u:***@h/x with ********"


def test_the_key_s_source_is_recorded_once_never_the_key(tmp_path: Path) -> None:
    """The variable that held the key (what `memfs mcp --print-config` names) and a refusal's
    words come from one decision of from_env; the ANTHROPIC_API_KEY wins over the token."""
    token = "sk-config-token-" + "t" * 20
    both = ClientConfig.from_env(env={**ENV, "ANTHROPIC_AUTH_TOKEN": token})
    assert (both.key_variable, both.auth_scheme) == ("ANTHROPIC_API_KEY", "x-api-key")
    assert both.refusal(401, "").startswith("the API key in ANTHROPIC_API_KEY was refused")
    bearer = ClientConfig.from_env(env={"ANTHROPIC_AUTH_TOKEN": token})
    assert (bearer.key_variable, bearer.auth_scheme) == ("ANTHROPIC_AUTH_TOKEN", "bearer")
    assert bearer.refusal(401, "").startswith("the token in ANTHROPIC_AUTH_TOKEN was refused")
    key_file = tmp_path / "key"
    key_file.write_text(ENV["ANTHROPIC_API_KEY"] + "\n")
    key_file.chmod(0o600)
    from_file = ClientConfig.from_env(api_key_file=key_file, env=ENV)
    assert from_file.key_variable is None  # a file is named by its option, in the words
    assert from_file.key_source == f"the API key in --api-key-file {key_file}"
    for config in (both, bearer, from_file):
        assert config.api_key.reveal() not in repr(config)
