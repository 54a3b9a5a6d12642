"""Where a Databricks mount finds its workspace and token: ``resolve_workspace``.

The way Databricks users expect, through databricks-sdk's own config resolution (extra
``databricks``): ``DATABRICKS_HOST`` + ``DATABRICKS_TOKEN``, or a profile of
``~/.databrickscfg`` (``--profile NAME``; else its ``DEFAULT`` profile). A personal access
token (auth type ``pat``) is sent as it is; any other credentials the SDK resolves to a Bearer
token (OAuth of ``databricks auth login``, a service principal, a metadata service) are asked
for fresh headers at every request (``Workspace.fresh_headers``: the SDK refreshes its tokens).
Tokens are held in a ``Secret`` and never appear in argv, logs or messages (the mount daemon
inherits the environment, as it does the Memory Stores key).

The SDK's import costs ~60 MB and ~3 s of CPU (its package imports every service module), more
than the rest of a mount. So the two plain cases, where the SDK would find a host and a personal
access token and nothing else, are read here as the SDK reads them (``_plain_workspace``): the
environment's ``DATABRICKS_HOST`` + ``DATABRICKS_TOKEN`` with no other variable the SDK reads,
or a profile of ``~/.databrickscfg`` holding only ``host`` and ``token`` with none of those
variables set. Anything else (another variable, another key, an unreadable file) is the SDK's,
imported then, so that what it would refuse or resolve differently never takes the short way.
"""

from __future__ import annotations

import configparser
import contextlib
import logging
import os
import urllib.parse
from collections.abc import Callable, Mapping
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


# Every variable databricks-sdk's Config reads (its attributes' ``env`` and aliases, 0.167;
# tests/api/test_databricks_config.py compares them with the installed SDK's): with any set but
# DATABRICKS_HOST and DATABRICKS_TOKEN, the SDK resolves the workspace.
SDK_VARIABLES = frozenset(
    {
        "DATABRICKS_HOST", "DATABRICKS_ACCOUNT_ID", "DATABRICKS_WORKSPACE_ID",
        "DATABRICKS_GROUP_ID", "DATABRICKS_CLOUD", "DATABRICKS_DISCOVERY_URL", "DATABRICKS_TOKEN",
        "DATABRICKS_TOKEN_AUDIENCE", "DATABRICKS_OIDC_TOKEN_ENV", "DATABRICKS_OIDC_TOKEN_FILEPATH",
        "DATABRICKS_OIDC_TOKEN_FILE", "DATABRICKS_USERNAME", "DATABRICKS_PASSWORD",
        "DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE",
        "DATABRICKS_CONFIG_FILE", "DATABRICKS_GOOGLE_SERVICE_ACCOUNT", "GOOGLE_CREDENTIALS",
        "DATABRICKS_AZURE_RESOURCE_ID", "ARM_USE_MSI", "ARM_CLIENT_SECRET", "ARM_CLIENT_ID",
        "ARM_TENANT_ID", "ARM_ENVIRONMENT", "DATABRICKS_CLI_PATH", "DATABRICKS_AUTH_TYPE",
        "DATABRICKS_CLUSTER_ID", "DATABRICKS_WAREHOUSE_ID", "DATABRICKS_SERVERLESS_COMPUTE_ID",
        "DATABRICKS_DEBUG_TRUNCATE_BYTES", "DATABRICKS_DEBUG_HEADERS", "DATABRICKS_RATE_LIMIT",
        "DATABRICKS_METADATA_SERVICE_URL", "DATABRICKS_DISABLE_ASYNC_TOKEN_REFRESH",
        "DATABRICKS_DISABLE_EXPERIMENTAL_FILES_API_CLIENT",
        "DATABRICKS_DISABLE_OAUTH_REFRESH_TOKEN",
    }
)  # fmt: skip
PLAIN_KEYS = frozenset({"host", "token"})  # a profile of these alone is a personal access token
SDK_SETTINGS = "__settings__"  # the SDK's section naming the default profile: the SDK reads it


def resolve_workspace(profile: str | None = None) -> Workspace:
    """The host and credentials of the workspace; ``ConfigError`` with a one-line message if
    there are none, or only credentials that give no Bearer token."""
    plain = _plain_workspace(profile, os.environ)
    if plain is not None:
        return _workspace(*plain)
    return _sdk_workspace(profile)


def _workspace(
    host: str,
    token: str,
    where: str,
    fresh: Callable[[], dict[str, str]] | None = None,
    token_source: str | None = None,
) -> Workspace:
    """``where``: what named the host (and, but for ``token_source``, the token)."""
    if token_source is None:
        token_source = "in DATABRICKS_TOKEN" if where == "DATABRICKS_HOST" else f"of {where}"
    return Workspace(
        ClientConfig(
            api_key=check_api_key(Secret(token.strip()), "the Databricks token"),
            base_url=check_base_url(host, where),
            auth_scheme="bearer",
            user_agent=USER_AGENT,
            key_source=f"the Databricks token {token_source}",
        ),
        fresh,
    )


def _plain_workspace(
    profile: str | None, environ: Mapping[str, str]
) -> tuple[str, str, str] | None:
    """(host, token, where they came from) when the SDK would resolve them to exactly that,
    a personal access token; None when the SDK must decide (module docstring)."""
    given = {name for name in SDK_VARIABLES if environ.get(name)}  # the SDK skips empty ones
    if given:
        if profile is not None or given != {"DATABRICKS_HOST", "DATABRICKS_TOKEN"}:
            return None
        host = _sdk_host(environ["DATABRICKS_HOST"])  # ~/.databrickscfg is not read then
        return None if host is None else (host, environ["DATABRICKS_TOKEN"], "DATABRICKS_HOST")
    path = Path("~/.databrickscfg").expanduser()
    # every section as written: no DEFAULT inherited by the others, no interpolation (the SDK
    # reads the raw sections too)
    parser = configparser.ConfigParser(default_section="\0", interpolation=None)
    try:
        with open(path, encoding="utf-8") as file:
            info = os.fstat(file.fileno())
            parser.read_file(file)
    except (OSError, UnicodeError, configparser.Error):
        return None  # missing or unreadable: the SDK says what is wrong
    section = profile
    if section is None:
        if parser.has_section(SDK_SETTINGS):
            return None
        section = "DEFAULT"
    if section == SDK_SETTINGS or not parser.has_section(section):
        return None
    keys = dict(parser.items(section))
    host = _sdk_host(keys["host"]) if set(keys) == PLAIN_KEYS and all(keys.values()) else None
    if host is None:
        return None
    if profile:  # its token: refused if others may read it (as after the SDK)
        check_key_file_mode(str(path), info)
    return host, keys["token"], f"profile {section!r} of ~/.databrickscfg"


def _sdk_host(host: str) -> str | None:
    """The host as the SDK fixes it (``_fix_host_if_needed``: a scheme if it has none, no
    trailing slash, no port 443); None if it cannot (the SDK's error then)."""
    if "://" not in host:
        host = "https://" + host
    try:
        parts = urllib.parse.urlparse(host)
        netloc = parts.netloc.split(":")[0] if parts.port == 443 else parts.netloc
    except ValueError:
        return None
    return urllib.parse.urlunparse(
        (parts.scheme, netloc, parts.path.rstrip("/"), parts.params, parts.query, parts.fragment)
    )


def _sdk_workspace(profile: str | None) -> Workspace:
    """``resolve_workspace`` by databricks-sdk's config resolution."""
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
    source = f"from the credentials of auth type {config.auth_type!r}" if fresh else None
    return _workspace(host, token, where, fresh, source)
