"""The benchmark harness (``bench``): every case loads, rounds become medians, and every case
reports in one JSON shape. The benchmarks themselves are long and are not run here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.harness import Case, case_names, load, medians, summary

ROOT = Path(__file__).resolve().parents[2]


def test_every_case_module_loads_as_a_case() -> None:
    names = case_names()
    modules = {p.stem for p in (ROOT / "bench" / "cases").glob("*.py")} - {"__init__"}
    assert names == sorted(modules)
    for name in names:
        _, case = load(name)
        assert isinstance(case, Case), name
        assert summary(name), name


def test_the_rounds_give_the_median_of_every_number() -> None:
    rounds = [
        [
            {"what": "a", "n": 1, "seconds": 1.0, "ok": True},
            {"what": "b", "n": 5, "seconds": 0.5, "ok": True},
        ],
        [
            {"what": "a", "n": 3, "seconds": 9.0, "ok": True},
            {"what": "b", "n": 5, "seconds": 0.7, "ok": True},
        ],
        [
            {"what": "a", "n": 2, "seconds": 2.0, "ok": True},
            {"what": "b", "n": 5, "seconds": 0.6, "ok": True},
        ],
    ]
    assert medians(rounds) == [
        {"what": "a", "n": 2, "seconds": 2.0, "ok": True},
        {"what": "b", "n": 5, "seconds": 0.6, "ok": True},
    ]


def test_a_case_reports_in_the_one_json_shape() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "change_bounds", "--changes", "50", "--runs", "2",
         "--rounds", "2", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert set(report) == {"case", "machine", "note", "options", "rounds", "rows"}
    assert report["case"] == "change_bounds"
    assert report["rounds"] == 2
    assert report["options"] == {"changes": 50, "runs": 2}
    assert {"date", "machine", "cpus", "python", "load_average"} <= set(report["machine"])
    assert [row["index of deletions"] for row in report["rows"]] == [
        "without",
        "with (schema step 9)",
    ]


def test_the_list_names_every_case() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--list"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert [line.split()[0] for line in done.stdout.splitlines()] == case_names()
