"""The benchmark harness: a case's options, its setup, its rounds and one report.

A case (``bench/cases/NAME.py``) defines ``CASE``, a :class:`Case`: ``add_options`` (its own
command-line options), ``setup`` (servers, mounts, seeded stores: entered once, left on the way
out even when a round fails) and ``run`` (one round, a list of rows). The harness runs
``--rounds`` rounds, takes the median of every number across them (rows match by position: a
round returns the same rows in the same order) and reports: the machine line, the case's note,
then one markdown table per kind of row (rows with the same fields); with ``--json``, one
document of the same shape for every case (:func:`document`).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import logging
import math
import os
import pkgutil
import platform
import statistics
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Generic, TypeVar, cast

import bench.cases

Value = str | int | float | bool | None
Row = dict[str, Value]
Fixture = TypeVar("Fixture")


class Case(ABC, Generic[Fixture]):
    """One benchmark. ``run`` measures one round on what ``setup`` made; the harness repeats it.

    ``rounds`` is the default of ``--rounds``. ``note`` says what was measured (sizes, counts)
    under the machine line; ``ok`` is False when the rows show a failure (exit status 1).
    """

    rounds: ClassVar[int] = 1

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """The case's own options (``--rounds`` and ``--json`` are the harness's)."""

    def check(self, parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
        """``parser.error`` on options that make no sense together."""

    def setup(self, options: argparse.Namespace) -> AbstractContextManager[Fixture]:
        """What every round runs on, made once (nothing by default)."""
        return nullcontext(cast(Fixture, None))

    @abstractmethod
    def run(self, options: argparse.Namespace, fixture: Fixture) -> list[Row]:
        """One round: the rows measured."""

    def finish(self, options: argparse.Namespace, rows: list[Row]) -> list[Row]:
        """The rows after the medians: where a ratio is one of medians, not a median of ratios."""
        return rows

    def note(self, options: argparse.Namespace) -> str:
        return ""

    def ok(self, rows: list[Row]) -> bool:
        return True


def median(values: Sequence[float]) -> float:
    """The median (0 for no values)."""
    return float(statistics.median(values)) if values else 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of ``values`` in any order (0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def timed(fn: Callable[[], object]) -> float:
    """Wall seconds of ``fn()``."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def machine() -> dict[str, Value]:
    """Where and when the figures were taken: the machine line's fields."""
    return {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "system": platform.system(),
        "python": platform.python_version(),
        "load_average": round(os.getloadavg()[0], 2),
    }


def machine_line(fields: dict[str, Value]) -> str:
    return (
        f"{fields['date']}, {fields['machine']}, {fields['cpus']} CPUs, {fields['system']}, "
        f"Python {fields['python']}, load average {fields['load_average']}"
    )


def _is_number(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def medians(rounds: list[list[Row]]) -> list[Row]:
    """Row by row, the median of each number over the rounds; other values from the first."""
    first = rounds[0]
    if any(len(rows) != len(first) for rows in rounds):
        raise RuntimeError("the rounds returned different numbers of rows")
    merged: list[Row] = []
    for index, row in enumerate(first):
        out: Row = {}
        for field, value in row.items():
            values = [rows[index].get(field) for rows in rounds]
            if all(_is_number(v) for v in values) and len(set(values)) > 1:
                out[field] = statistics.median(cast(list[float], values))
            else:
                out[field] = value
        merged.append(out)
    return merged


def _cell(value: Value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"  # never 1.2e+04
    return str(value)


def tables(rows: list[Row]) -> str:
    """One markdown table per kind of row (the same fields), in the order they first appear."""
    kinds: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        kinds.setdefault(tuple(row), []).append(row)
    out = []
    for fields, members in kinds.items():
        lines = ["| " + " | ".join(fields) + " |"]
        lines.append(
            "|"
            + "|".join("---:" if any(_is_number(r[f]) for r in members) else "---" for f in fields)
            + "|"
        )
        lines += ["| " + " | ".join(_cell(r[f]) for f in fields) + " |" for r in members]
        out.append("\n".join(lines))
    return "\n\n".join(out)


def document(
    name: str, options: argparse.Namespace, rounds: int, rows: list[Row], note: str
) -> dict[str, Any]:
    """The one JSON shape of every case."""
    settings = {k: v for k, v in vars(options).items() if k not in ("json", "rounds")}
    return {
        "case": name,
        "machine": machine(),
        "note": note,
        "options": json.loads(json.dumps(settings, default=str)),
        "rounds": rounds,
        "rows": rows,
    }


def case_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.cases.__path__))


def summary(name: str) -> str:
    """The first sentence of a case's docstring, read without importing the case."""
    source = Path(bench.cases.__path__[0], f"{name}.py").read_text()
    paragraph = (ast.get_docstring(ast.parse(source)) or "").split("\n\n")[0]
    return " ".join(paragraph.split()).split(". ")[0].rstrip(".")


def load(name: str) -> tuple[ModuleType, Case[Any]]:
    module = importlib.import_module(f"bench.cases.{name}")
    return module, cast(Case[Any], module.CASE)


def run_case(name: str, argv: list[str]) -> int:
    """``python -m bench NAME ARGS``: parse, set up, run the rounds, report; the exit status."""
    module, case = load(name)
    summary = (module.__doc__ or name).strip()
    parser = argparse.ArgumentParser(
        prog=f"python -m bench {name}",
        description=summary,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    case.add_options(parser)
    parser.add_argument(
        "--rounds", type=int, default=case.rounds,
        help=f"rounds measured; numbers are their medians (default {case.rounds})",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds must be positive")
    case.check(parser, options)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("bench").setLevel(logging.INFO)  # the cases' progress, on stderr

    with case.setup(options) as fixture:
        rounds = [case.run(options, fixture) for _ in range(options.rounds)]
    rows = case.finish(options, medians(rounds))
    note = case.note(options)
    if options.json:
        print(json.dumps(document(name, options, options.rounds, rows, note), indent=2))
    else:
        print(machine_line(machine()) + f"; median of {options.rounds} round(s)")
        if note:
            print(note)
        print()
        print(tables(rows))
    return 0 if case.ok(rows) else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = case_names()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m bench NAME [--rounds N] [--json] [options of NAME]")
        print("       python -m bench --list       (python -m bench NAME --help: its options)")
        return 0 if argv else 2
    if argv[0] == "--list":
        for name in names:
            print(f"{name:16} {summary(name)}")
        return 0
    if argv[0] not in names:
        print(f"python -m bench: no case {argv[0]!r} (python -m bench --list)", file=sys.stderr)
        return 2
    return run_case(argv[0], argv[1:])
