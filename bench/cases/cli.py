"""Benchmark the start-up of the ``memfs`` command: how long before it has done its job.

Runs each command ``--runs`` times as a user does (the installed ``memfs`` script, a fresh
process each time) and reports the median wall time and the median CPU time (user + system of
the process: less sensitive to other work on a shared machine): the interpreter alone (the
floor), ``--version``, ``--help``, a usage error, ``mount --help``, ``completion bash``, and two
admin commands against a local ``memfs server`` (``stores list``, one request; ``memories ls``,
two). Goals (issue 13): 0.15 s for help, version and usage errors; 0.3 s plus the requests for
an admin command.

Owns no product code.
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.fixtures import bench_key, memfs_command, server_on
from bench.harness import Case, Row

GOAL_INSTANT = 0.15  # --help, --version, usage errors
GOAL_ADMIN = 0.30  # an admin command, plus its requests


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


class CliCase(Case[None]):
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-n", "--runs", type=int, default=15, help="runs per command")

    def note(self, options: argparse.Namespace) -> str:
        return f"each command: median of {options.runs} runs"

    def run(self, options: argparse.Namespace, fixture: None) -> list[Row]:
        runs = options.runs
        memfs = memfs_command()
        key = bench_key()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMFS_"))}
        local = [
            ("`memfs --version`", ["--version"], 0, GOAL_INSTANT),
            ("`memfs --help`", ["--help"], 0, GOAL_INSTANT),
            ("usage error (`memfs mount` without arguments)", ["mount"], 2, GOAL_INSTANT),
            ("`memfs mount --help`", ["mount", "--help"], 0, GOAL_INSTANT),
            ("`memfs completion bash`", ["completion", "bash"], 0, None),
        ]
        wall, cpu = measure([sys.executable, "-c", "pass"], env, runs, 0)
        rows: list[Row] = [{"command": "`python -c pass` (the interpreter alone)", "wall_s": wall,
                            "cpu_s": cpu, "goal_s": None}]  # fmt: skip
        for label, argv, expect, goal in local:
            if argv[0] == "completion" and not has_completion(memfs, env):
                continue  # measuring a version of memfs without the command
            wall, cpu = measure(memfs + argv, env, runs, expect)
            rows.append({"command": label, "wall_s": wall, "cpu_s": cpu, "goal_s": goal})

        with (
            tempfile.TemporaryDirectory(prefix="memfs-bench-cli-") as tmp,
            server_on(Path(tmp) / "bench.db", key) as server,
        ):
            client_env = dict(env, ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=server.base_url)
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
                wall, cpu = measure(memfs + argv, client_env, runs, 0)
                rows.append({"command": label, "wall_s": wall, "cpu_s": cpu, "goal_s": GOAL_ADMIN})
        return rows


def has_completion(memfs: list[str], env: dict[str, str]) -> bool:
    proc = subprocess.run([*memfs, "completion", "--help"], env=env, capture_output=True)
    return proc.returncode == 0


CASE = CliCase()
