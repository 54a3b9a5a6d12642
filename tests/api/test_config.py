"""``ClientConfig.from_env`` refuses an unusable base URL once, for every command."""

from __future__ import annotations

import pytest

from memfs.config import DEFAULT_BASE_URL, ClientConfig, ConfigError, check_base_url

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
