"""``memfs server``: run the reference Memory Stores API server.

Parses the command line, collects API keys (``--api-key``, repeatable, and/or ``MEMFS_API_KEYS``,
comma-separated) and the optional admin key (``MEMFS_ADMIN_KEY`` or ``--admin-key-file``, never
argv), configures logging and hands over to ``memfs.server.serve``. Never prints a key: a key on
the command line only earns a warning that argv is visible to other users.

Start-up failures are one line on stderr (``memfs server: cannot listen on 127.0.0.1:8700: address
already in use``), never a traceback, and exit 1; usage errors exit 2 (``EXIT_CODES``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from memfs.commands.extras import missing_extra, needs_extra
from memfs.commands.parsing import RawDescriptionDefaultsHelpFormatter, complete_paths

log = logging.getLogger(__name__)

KEYS_ENV = "MEMFS_API_KEYS"
ADMIN_KEY_ENV = "MEMFS_ADMIN_KEY"

EXIT_OK = 0  # stopped by SIGINT/SIGTERM
EXIT_FAILED = 1  # could not start (address, database), or failed while running
EXIT_USAGE = 2  # bad arguments, no API key

EXIT_CODES = f"""exit status:
  {EXIT_OK}  stopped by SIGINT or SIGTERM
  {EXIT_FAILED}  could not start: cannot listen on --host:--port (address in use, host unknown
     or not on this machine) or cannot open --db (missing directory, not a database,
     PostgreSQL unreachable); one line on stderr says which. Also: failed while running.
  {EXIT_USAGE}  usage error: bad arguments, no API key, an unusable admin key, a missing extra
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "server",
        help="run the reference Memory Stores API server",
        description=(
            "Serve the Memory Stores API from a SQLite database file, or from PostgreSQL "
            "(--db postgresql://…; run any number of replicas on one database). API keys come "
            f"from {KEYS_ENV} (comma-separated) and/or --api-key."
        ),
        epilog=EXIT_CODES,
        formatter_class=RawDescriptionDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--db",
        required=True,
        help="SQLite database file (created if missing) or a postgresql:// URL",
    )
    parser.add_argument(
        "--pool-size",
        type=int,
        default=10,
        metavar="N",
        help="PostgreSQL connections of this replica",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=8700, help="port to bind")
    parser.add_argument(
        "--mcp-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients reach the MCP endpoints by, besides the bound address (and "
        "localhost for a loopback or wildcard bind); repeatable. Any other Host header is "
        "refused (421), as an Origin not of these names (403): DNS-rebinding protection",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help=f"accept this API key (repeatable); prefer {KEYS_ENV}: argv is visible to other users",
    )
    parser.add_argument(
        "--version-retention-days",
        type=float,
        default=30.0,
        metavar="DAYS",
        help="prune versions older than this, keeping each memory's newest",
    )
    parser.add_argument(
        "--faults",
        metavar="SPEC",
        help=(
            "inject faults for tests and benchmarks, e.g. 'latency=0.05,drop=0.1' or 'none' "
            "(also MEMFS_SERVER_FAULTS); switchable at run time through PUT /v1/memfs/faults "
            f"with the admin key ({ADMIN_KEY_ENV} or --admin-key-file)"
        ),
    )
    parser.add_argument(
        "--admin-key-file",
        metavar="FILE",
        help=(
            "read the admin key, which alone may switch faults at run time, from FILE (mode "
            f"0600); or set {ADMIN_KEY_ENV}. Without one, fault control is off"
        ),
    )
    parser.add_argument(
        "--access-log",
        metavar="FILE",
        help="log one line per request (time, method, route template, status, duration, request "
        "id; never keys, ids or paths) to FILE, or - for standard output (default: none)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a request body must arrive within this many seconds of its first read, else the "
        "request gets 408 and its connection is closed",
    )
    parser.add_argument(
        "--max-streams-per-key",
        type=int,
        default=64,
        metavar="N",
        help="open change streams (both APIs together) one API key may hold on this server; "
        "one more gets 429 with retry-after",
    )
    parser.add_argument(
        "--stream-buffer",
        type=int,
        default=1024,
        metavar="EVENTS",
        help="recent changes of each followed store kept for its change streams (read from the "
        "database once for all of them); a stream that lags further behind reads the database "
        "on its own until it catches up",
    )
    parser.add_argument(
        "--h2c",
        action="store_true",
        help="also speak HTTP/2 cleartext (an Upgrade: h2c request or the HTTP/2 preface); "
        "off by default: HTTP/1.1 only",
    )
    parser.add_argument(
        "--no-console",
        dest="console",
        action="store_false",
        help="do not serve the console (web pages at /console where people sign in with an API "
        "key to browse and edit stores; docs/console.md)",
    )
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="rank searches by meaning too: an embedding model bundled in the semantic extra, "
        "fused with BM25 full-text ranking (documents are embedded when written)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level",
    )
    complete_paths(parser, files=("db", "admin_key_file", "access_log"))
    parser.set_defaults(func=needs_extra("server", "memfs server", run))


def collect_keys(cli_keys: list[str], environ: dict[str, str] | os._Environ[str]) -> list[str]:
    keys = [k.strip() for k in environ.get(KEYS_ENV, "").split(",") if k.strip()]
    keys += [k.strip() for k in cli_keys if k.strip()]
    return list(dict.fromkeys(keys))


class UsageError(Exception):
    """A setting the server refuses to start with; ``str()`` is one line without any key."""


def read_admin_key(key_file: str | None, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The admin key from ``MEMFS_ADMIN_KEY`` or ``key_file`` (only one), None if neither."""
    from memfs.api.config import ConfigError, read_key_file

    from_env = environ.get(ADMIN_KEY_ENV, "").strip()
    if key_file is None:
        key = from_env
        source = ADMIN_KEY_ENV
    else:
        if from_env:
            raise UsageError(f"give the admin key once: {ADMIN_KEY_ENV} or --admin-key-file")
        try:  # refused if others may read it, or if it holds more than the key
            key = read_key_file(key_file).reveal()
        except ConfigError as exc:
            raise UsageError(f"--admin-key-file: {exc}") from None
        source = "--admin-key-file"
    if not key:
        return None
    # It travels in an HTTP header, where anything else would be refused or changed in transit.
    if not (key.isascii() and key.isprintable() and " " not in key):
        raise UsageError(f"the admin key from {source} must be printable ASCII without spaces")
    return key


def run(args: argparse.Namespace) -> int:
    import trio

    from memfs.server.mcp.endpoint import allowed_host_names
    from memfs.server.serve import ServerSettings, StartupError, serve

    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.api_key:
        print(
            "memfs server: warning: an API key given with --api-key is visible to other users "
            f"of this machine (ps, /proc); prefer the {KEYS_ENV} environment variable",
            file=sys.stderr,
        )
    keys = collect_keys(args.api_key, os.environ)
    if not keys:
        print(f"memfs server: no API key: set {KEYS_ENV} or pass --api-key", file=sys.stderr)
        return EXIT_USAGE
    if not 0 < args.port < 65536:
        print(f"memfs server: invalid port {args.port}", file=sys.stderr)
        return EXIT_USAGE
    if args.version_retention_days <= 0:
        print("memfs server: --version-retention-days must be positive", file=sys.stderr)
        return EXIT_USAGE
    if args.pool_size < 1:
        print("memfs server: --pool-size must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if not 0 < args.body_timeout <= 3600:  # also refuses nan
        print("memfs server: --body-timeout must be from 0 to 3600 seconds", file=sys.stderr)
        return EXIT_USAGE
    if args.stream_buffer < 1:
        print("memfs server: --stream-buffer must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.max_streams_per_key < 1:
        print("memfs server: --max-streams-per-key must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.db.startswith(("postgresql://", "postgres://")):
        message = missing_extra("memfs server --db postgresql://…", "postgres")
        if message is not None:
            print(message, file=sys.stderr)
            return EXIT_USAGE
    if args.semantic:
        message = missing_extra("memfs server --semantic", "semantic")
        if message is not None:
            print(message, file=sys.stderr)
            return EXIT_USAGE
    try:
        admin_key = read_admin_key(args.admin_key_file, os.environ)
    except UsageError as exc:
        print(f"memfs server: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if admin_key is not None and admin_key in keys:
        print("memfs server: the admin key must differ from every API key", file=sys.stderr)
        return EXIT_USAGE
    from memfs.server.http.faults import FAULTS_ENV, FaultSpec, FaultSpecError

    faults = args.faults if args.faults is not None else os.environ.get(FAULTS_ENV)
    if faults is not None:
        try:
            FaultSpec.parse(faults)
        except FaultSpecError as exc:
            print(f"memfs server: --faults: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.access_log is not None:
        from memfs.host.private import open_append
        from memfs.server.http.access_log import open_access_log

        def open_file(name: str) -> int:  # 0600, never through a link planted at its name
            return open_append(Path(name), "access log")

        try:
            open_access_log(args.access_log, open_file)
        except OSError as exc:  # memfs.host.private.NotPrivateError too: a planted link, say
            print(f"memfs server: --access-log: {exc}", file=sys.stderr)
            return EXIT_USAGE
    settings = ServerSettings(
        db=args.db,
        pool_size=args.pool_size,
        api_keys=keys,
        host=args.host,
        port=args.port,
        retention_days=args.version_retention_days,
        faults=faults,
        admin_key=admin_key,
        semantic=args.semantic,
        body_timeout=args.body_timeout,
        max_streams_per_key=args.max_streams_per_key,
        stream_buffer=args.stream_buffer,
        h2c=args.h2c,
        mcp_hosts=tuple(allowed_host_names(args.host, args.mcp_host)),
        console=args.console,
    )
    try:
        trio.run(serve, settings)
    except StartupError as exc:
        print(f"memfs server: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
