"""Where a Databricks mount finds its workspace and token: ``resolve_workspace``.

The way Databricks users expect, through databricks-sdk's own config resolution (extra
``databricks``): ``DATABRICKS_HOST`` + ``DATABRICKS_TOKEN``, or a profile of
``~/.databrickscfg`` (``--profile NAME``; else its ``DEFAULT`` profile). The SDK is imported
here only, when a Databricks store is mounted: the command line never pays for it. A personal
access token (auth type ``pat``) is sent as it is; any other credentials the SDK resolves to a
Bearer token (OAuth of ``databricks auth login``, a service principal, a metadata service) are
asked for fresh headers at every request (``Workspace.fresh_headers``: the SDK refreshes its
tokens). Tokens are held in a ``Secret`` and never appear in argv, logs or messages (the mount
daemon inherits the environment, as it does the Memory Stores key).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memfs.api.config import (
    ClientConfig,
    ConfigError,
    Secret,
    check_api_key,
    check_base_url,
    check_key_file_mode,
)

log = logging.getLogger(__name__)

USER_AGENT = "memfs/0.1"


@dataclass(frozen=True)
class Workspace:
    """Where a Databricks client connects, and how it authenticates."""

    config: ClientConfig  # host, and the token (a PAT, or the first token of other credentials)
    # the SDK's header factory for credentials whose tokens expire (OAuth); None: a PAT
    fresh_headers: Callable[[], dict[str, str]] | None = None


def resolve_workspace(profile: str | None = None) -> Workspace:
    """The host and credentials of the workspace; ``ConfigError`` with a one-line message if
    there are none, or only credentials that give no Bearer token."""
    try:
        from databricks.sdk.core import Config
    except ImportError:
        raise ConfigError(
            "mounting a Databricks store needs the databricks extra (databricks-sdk is "
            "missing): pip install '/path/to/memfs[databricks]'"
        ) from None
    # the SDK logs its probe of the host's metadata at WARNING (a 404 on most hosts)
    logging.getLogger("databricks.sdk").setLevel(logging.ERROR)
    where = f"profile {profile!r} of ~/.databrickscfg" if profile else "DATABRICKS_HOST"
    try:
        config = Config(profile=profile, retry_timeout_seconds=10, http_timeout_seconds=5)
    except ValueError as exc:
        # the SDK's message names what it tried; never a token (it masks them)
        first = str(exc).splitlines()[0] if str(exc) else "no configuration"
        raise ConfigError(f"no Databricks workspace ({where}): {first}") from None
    if profile:  # its token came from the SDK's config file: refused if others may read it
        config_file = Path(config.config_file or "~/.databrickscfg").expanduser()
        with contextlib.suppress(OSError):
            check_key_file_mode(str(config_file), config_file.stat())
    host = config.host
    if not host:
        raise ConfigError(
            "no Databricks workspace: set DATABRICKS_HOST and DATABRICKS_TOKEN, or pass "
            "--profile NAME (a profile of ~/.databrickscfg)"
        )
    fresh: Callable[[], dict[str, str]] | None = None
    token = config.token
    if not token:  # OAuth and the like: the SDK's provider makes (and refreshes) the token
        fresh = config.authenticate
        try:
            authorization = fresh().get("Authorization", "")
        except Exception as exc:  # the SDK's own errors: their first line, never a token
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(
                f"the Databricks credentials (auth type {config.auth_type!r}) gave no token: "
                f"{first}"
            ) from None
        scheme, _, token = authorization.partition(" ")
        if scheme != "Bearer" or not token:
            raise ConfigError(
                f"the Databricks credentials (auth type {config.auth_type!r}) give no Bearer "
                "token: set DATABRICKS_TOKEN, or use a profile with a token or OAuth"
            )
    return Workspace(
        ClientConfig(
            api_key=check_api_key(Secret(token.strip()), "the Databricks token"),
            base_url=check_base_url(host, where),
            auth_scheme="bearer",
            user_agent=USER_AGENT,
        ),
        fresh,
    )
