"""Settings, as frozen dataclasses, and where they come from (environment, key files).

The API key is held in a ``Secret`` so that no ``repr``, log line or traceback can show it.
Keys come from ``ANTHROPIC_API_KEY`` or a key file, never from the command line (argv is
readable by every user of the machine through ``/proc``). A key is checked before any request
(``check_api_key``): one that could not travel in an HTTP header is a one-line ``ConfigError``
that never repeats it. A base URL may carry ``user:password@``: every message shows it through
``shown_url``, which masks the password.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
MEMORY_BETA = "agent-memory-2026-07-22"


class ConfigError(ValueError):
    """A setting is missing or unusable; the message is meant for a person."""


class Secret:
    """A string that never shows itself in ``repr`` or ``str``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def check_api_key(key: Secret, source: str = "the API key") -> Secret:
    """``key`` if it can travel in an HTTP header: printable ASCII without white space.

    Else ``ConfigError`` naming ``source`` and what is wrong, never the key itself (an
    unchecked key would fail inside httpx with an error, and a traceback, that quote it).
    """
    value = key.reveal()
    if not value:
        raise ConfigError(f"{source} is empty")
    for position, char in enumerate(value, start=1):
        if "!" <= char <= "~":
            continue
        if char in "\r\n":
            what = "a line break"
        elif char.isspace():
            what = "white space"
        elif ord(char) < 32 or ord(char) == 127:
            what = "a control character"
        else:
            what = "a non-ASCII character"
        raise ConfigError(
            f"{source} is not a usable API key: it contains {what} (character {position}); "
            "keys are printable ASCII without spaces"
        )
    return key


def check_key_file_mode(name: str, info: os.stat_result) -> None:
    """``ConfigError`` naming the file and the fix if a file holding a key gives group or
    others any permission: a key others can read is no longer a secret."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"the key file {name} is open to other users (mode {mode:04o}); make it private: "
            f"chmod 600 {name}"
        )


def read_key_file(path: str | os.PathLike[str]) -> Secret:
    """Read a key from a file that only its owner may use (no permission for group or others)
    holding the key alone, on one line (white space around it and empty lines are ignored;
    checked by ``check_api_key``). Anything else is a one-line ``ConfigError`` that never
    quotes the file's content: a key others can read is no longer a secret, and a second line
    (a second key, a note) was silently ignored before."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            check_key_file_mode(name, os.fstat(handle.fileno()))  # of what was opened
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read API key file {name}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"API key file {name} is not UTF-8 text") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ConfigError(f"API key file {name} is empty")
    if len(lines) > 1:
        raise ConfigError(
            f"the key file {name} has {len(lines)} lines; it must hold the key alone, on one line"
        )
    return check_api_key(Secret(lines[0]), f"the API key in {name}")


def shown_url(url: str) -> str:
    """``url`` as it may appear in a message: a ``user:password@`` part shows as ``user:***@``
    (a user part alone, perhaps a token, as ``***@``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not at:
        return url
    user, colon, _ = userinfo.partition(":")
    masked = f"{user}:***" if colon else "***"
    return f"{scheme}://{masked}@{host}{rest[end:]}"


def check_base_url(url: str, source: str = "base URL") -> str:
    """``url`` (stripped, without trailing slashes) if it is an http(s) URL with a host.

    Else ``ConfigError`` naming ``source`` (``ANTHROPIC_BASE_URL``, ``--base-url``) and the
    reason. A user:password part is never repeated in the message.
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed [ of an IPv6 address
        parts = urlsplit("")
    try:
        bad_port = parts.port == 0
    except ValueError:
        bad_port = True
    if not parts.scheme or not parts.netloc:
        reason = "it needs a scheme and a host"
    elif parts.scheme not in ("http", "https"):
        reason = f"unsupported scheme {parts.scheme!r}"
    elif not parts.hostname:
        reason = "it has no host"
    elif bad_port:
        reason = "invalid port"
    elif any(ch.isspace() or ord(ch) < 32 for ch in url):
        reason = "it contains white space or control characters"
    else:
        return url.rstrip("/")
    raise ConfigError(
        f"invalid {source} {shown_url(url)!r}: {reason} (want http:// or https://, "
        "e.g. https://api.anthropic.com or http://127.0.0.1:8700)"
    )


@dataclass(frozen=True)
class ClientConfig:
    """How to reach a Memory Stores API."""

    api_key: Secret
    base_url: str = DEFAULT_BASE_URL
    # "x-api-key" for API keys; "bearer" for a session-scoped token (ANTHROPIC_AUTH_TOKEN), sent
    # as `Authorization: Bearer`, which is how a sandbox's writes are credited to its session on
    # the hosted service.
    auth_scheme: Literal["x-api-key", "bearer"] = "x-api-key"
    session_id: str | None = None  # sent as models.SESSION_HEADER when set
    # where the key came from, never the key itself: the environment variable that held it
    # (None for a key file, or a key given in code), which `memfs mcp --print-config` names,
    # and the words a refusal names it by, both decided once (from_env)
    key_variable: str | None = None
    key_source: str = "the API key"
    timeout: float = 30.0  # seconds per request attempt
    connect_timeout: float = 5.0
    max_retries: int = 4
    max_connections: int = 20
    user_agent: str = field(default="memfs/0.1")

    def __post_init__(self) -> None:
        check_api_key(self.api_key)  # before any request, whoever built the config

    def __repr__(self) -> str:
        return (
            f"ClientConfig(base_url={shown_url(self.base_url)!r}, "
            f"auth_scheme={self.auth_scheme!r}, session_id={self.session_id!r})"
        )

    @property
    def shown_base_url(self) -> str:
        """The base URL for messages (password masked: ``shown_url``)."""
        return shown_url(self.base_url)

    def refusal(self, status: int, server_says: str) -> str:
        """A refused key (401) or request (403) in words that name where the key came from and
        the server that refused it, so that the fix is plain; never the key itself."""
        if status == 401:
            return f"{self.key_source} was refused by {self.shown_base_url}"
        return f"{self.key_source} may not do this at {self.shown_base_url}: {server_says}"

    def hide_secrets(self, text: str) -> str:
        """``text`` without the key or the base URL's password (for messages quoting others,
        such as an exception of the HTTP library)."""
        text = text.replace(self.api_key.reveal(), "********")  # checked: printable, non-empty
        return text.replace(self.base_url, self.shown_base_url)

    def auth_headers(self) -> dict[str, str]:
        """The credential header of every request (one form only)."""
        if self.auth_scheme == "bearer":
            return {"authorization": f"Bearer {self.api_key.reveal()}"}
        return {"x-api-key": self.api_key.reveal()}

    @classmethod
    def from_env(
        cls,
        *,
        api_key_file: str | os.PathLike[str] | None = None,
        base_url: str | None = None,
        env: dict[str, str] | None = None,
        **overrides: object,
    ) -> ClientConfig:
        """Build from a key file, ``ANTHROPIC_API_KEY``, or ``ANTHROPIC_AUTH_TOKEN`` (bearer).

        The base URL comes from ``base_url`` or ``ANTHROPIC_BASE_URL``, as in the official SDK;
        one that is not an http(s) URL with a host is a ``ConfigError`` (``check_base_url``).
        """
        environ = os.environ if env is None else env
        scheme: Literal["x-api-key", "bearer"] = "x-api-key"
        variable: str | None = None
        if api_key_file is not None:
            key = read_key_file(api_key_file)
            source = f"the API key in --api-key-file {os.fspath(api_key_file)}"
        elif environ.get("ANTHROPIC_API_KEY"):
            variable = "ANTHROPIC_API_KEY"
            key = check_api_key(Secret(environ[variable].strip()), variable)
            source = f"the API key in {variable}"
        elif environ.get("ANTHROPIC_AUTH_TOKEN"):
            variable = "ANTHROPIC_AUTH_TOKEN"
            key, scheme = check_api_key(Secret(environ[variable].strip()), variable), "bearer"
            source = f"the token in {variable}"
        else:
            raise ConfigError(
                "no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) "
                "or pass --api-key-file FILE"
            )
        if base_url:
            url = check_base_url(base_url, "--base-url")
        elif environ.get("ANTHROPIC_BASE_URL"):
            url = check_base_url(environ["ANTHROPIC_BASE_URL"], "ANTHROPIC_BASE_URL")
        else:
            url = DEFAULT_BASE_URL
        return cls(
            api_key=key,
            base_url=url,
            auth_scheme=scheme,
            key_variable=variable,
            key_source=source,
            **overrides,  # type: ignore[arg-type]
        )
