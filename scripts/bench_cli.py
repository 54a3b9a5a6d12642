#!/usr/bin/env python3
"""Benchmark the start-up of the ``memfs`` command: how long before it has done its job.

Runs each command ``--runs`` times as a user does (the installed ``memfs`` script, a fresh
process each time) and reports the median wall time and the median CPU time (user + system of
the process: less sensitive to other work on a shared machine): the interpreter alone (the
floor), ``--version``, ``--help``, a usage error, ``mount --help``, ``completion bash``, and two
admin commands against a local ``memfs server`` (``stores list``, one request; ``memories ls``,
two). Goals (issue 13): 0.15 s for help, version and usage errors; 0.3 s plus the requests for
an admin command.

Prints a markdown table, or JSON with ``--json``. Owns no product code.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import server_on

GOAL_INSTANT = 0.15  # --help, --version, usage errors
GOAL_ADMIN = 0.30  # an admin command, plus its requests


def memfs_command() -> list[str]:
    """The ``memfs`` console script next to this interpreter (what a user runs), else -m."""
    script = Path(sys.executable).parent / "memfs"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memfs"]


def measure(argv: list[str], env: dict[str, str], runs: int, expect: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``argv`` over ``runs`` fresh processes."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != expect:
            raise SystemExit(
                f"{' '.join(argv)}: exit status {proc.returncode}, wanted {expect}:\n"
                f"{proc.stderr.decode(errors='replace')[-2000:]}"
            )
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=15, help="runs per command")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()

    memfs = memfs_command()
    key = "sk-memfs-bench-" + secrets.token_hex(12)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMFS_"))}
    local = [
        ("`memfs --version`", ["--version"], 0, GOAL_INSTANT),
        ("`memfs --help`", ["--help"], 0, GOAL_INSTANT),
        ("usage error (`memfs mount` without arguments)", ["mount"], 2, GOAL_INSTANT),
        ("`memfs mount --help`", ["mount", "--help"], 0, GOAL_INSTANT),
        ("`memfs completion bash`", ["completion", "bash"], 0, None),
    ]
    wall, cpu = measure([sys.executable, "-c", "pass"], env, args.runs, 0)
    rows = [{"command": "`python -c pass` (the interpreter alone)", "wall_s": wall, "cpu_s": cpu,
             "goal_s": None}]  # fmt: skip
    for label, argv, expect, goal in local:
        if argv[0] == "completion" and not has_completion(memfs, env):
            continue  # measuring a version of memfs without the command
        wall, cpu = measure(memfs + argv, env, args.runs, expect)
        rows.append({"command": label, "wall_s": wall, "cpu_s": cpu, "goal_s": goal})

    with (
        tempfile.TemporaryDirectory(prefix="memfs-bench-cli-") as tmp,
        server_on(Path(tmp) / "bench.db", key) as base_url,
    ):
        client_env = dict(env, ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=base_url)
        store = f"bench-{secrets.token_hex(4)}"
        subprocess.run([*memfs, "stores", "create", store], env=client_env, check=True,
                       capture_output=True)  # fmt: skip
        for n in range(20):
            subprocess.run([*memfs, "memories", "put", store, f"/notes/n{n}.md"],
                           input=b"note\n", env=client_env, check=True,
                           capture_output=True)  # fmt: skip
        admin = [
            ("`memfs stores list` (1 request)", ["stores", "list"]),
            ("`memfs memories ls STORE` (2 requests)", ["memories", "ls", store, "/notes/"]),
        ]
        for label, argv in admin:
            wall, cpu = measure(memfs + argv, client_env, args.runs, 0)
            rows.append({"command": label, "wall_s": wall, "cpu_s": cpu, "goal_s": GOAL_ADMIN})

    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}; "
        f"median of {args.runs} runs"
    )
    print()
    print("| command | wall (s) | CPU (s) | goal (s) |")
    print("|---|---:|---:|---:|")
    for row in rows:
        goal = "" if row["goal_s"] is None else f"{row['goal_s']:.2f}"
        print(f"| {row['command']} | {row['wall_s']:.3f} | {row['cpu_s']:.3f} | {goal} |")
    return 0


def has_completion(memfs: list[str], env: dict[str, str]) -> bool:
    proc = subprocess.run([*memfs, "completion", "--help"], env=env, capture_output=True)
    return proc.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
