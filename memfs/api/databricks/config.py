"""Where a Databricks mount finds its workspace and token: ``resolve_workspace``.

The way Databricks users expect, through databricks-sdk's own config resolution (extra
``databricks``): ``DATABRICKS_HOST`` + ``DATABRICKS_TOKEN``, or a profile of
``~/.databrickscfg`` (``--profile NAME``; else its ``DEFAULT`` profile). The SDK is imported
here only, when a Databricks store is mounted: the command line never pays for it. memfs needs a
personal access token (auth type ``pat``); the token is held in a ``Secret`` and never appears
in argv, logs or messages (the mount daemon inherits the environment, as it does the Memory
Stores key).
"""

from __future__ import annotations

import logging

from memfs.api.config import ClientConfig, ConfigError, Secret, check_api_key, check_base_url

log = logging.getLogger(__name__)

USER_AGENT = "memfs/0.1"


def resolve_workspace(profile: str | None = None) -> ClientConfig:
    """The host and token of the workspace, as a ``ClientConfig`` (Bearer); ``ConfigError``
    with a one-line message if there are none, or only credentials memfs cannot use."""
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
    host = config.host
    if not host:
        raise ConfigError(
            "no Databricks workspace: set DATABRICKS_HOST and DATABRICKS_TOKEN, or pass "
            "--profile NAME (a profile of ~/.databrickscfg)"
        )
    token = config.token
    if not token:
        raise ConfigError(
            f"memfs needs a Databricks personal access token (DATABRICKS_TOKEN, or token = in "
            f"the profile); the workspace's auth type {config.auth_type!r} is not supported"
        )
    source = "the Databricks token"
    return ClientConfig(
        api_key=check_api_key(Secret(token.strip()), source),
        base_url=check_base_url(host, where),
        auth_scheme="bearer",
        user_agent=USER_AGENT,
    )
