"""The LoCoMo case (``python -m bench locomo``) on a tiny made-up conversation of the same
shape: the ranks it finds and the scores it computes from them, on both APIs and both
granularities. The real data (``shared/locomo-dev``) is never read here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.cases.locomo import Question, hit_rank, quality

ROOT = Path(__file__).resolve().parents[2]

CONVERSATION = {
    "speaker_a": "Ada",
    "speaker_b": "Bo",
    "session_1_date_time": "1:00 pm on 2 May, 2023",
    "session_1": [
        {"speaker": "Ada", "dia_id": "D1:1", "text": "Good afternoon, how was the week?"},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "I climbed the old tower by the sea."},
        {"speaker": "Ada", "dia_id": "D1:3", "text": "Stripes everywhere at the fair."},
    ],
    "session_2_date_time": "9:30 am on 20 May, 2023",
    "session_2": [
        {
            "speaker": "Bo",
            "dia_id": "D2:1",
            "text": "Look who lives with us now!",
            "blip_caption": "a photo of an okapi in a garden",
        },
        {"speaker": "Ada", "dia_id": "D2:2", "text": "I saw one zebra at the zoo with my family"},
    ],
    # LoCoMo ships these too; they are not turns and are not stored
    "session_1_summary": "Bo visited a lighthouse.",
    "events_session_1": {"Bo": ["visited a lighthouse"]},
    "qa": [
        {"question": "Which animal did Bo take in? An okapi?", "evidence": ["D2:1"], "category": 4},
        {"question": "Where is the lighthouse?", "evidence": ["D1:2"], "category": 1},
        {"question": "Who is Bo?", "answer": "", "evidence": ["D1:1"], "category": 5},
        {"question": "When was the zebra seen?", "evidence": ["D2:2; D9:1"], "category": 2},
        {"question": "Which okapi?", "evidence": ["D7:7"], "category": 3},  # no such turn
    ],
}


def run_case(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "locomo", "--data", str(data), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )  # fmt: skip


def test_the_case_finds_the_evidence_and_scores_it(tmp_path: Path) -> None:
    (tmp_path / "7.json").write_text(json.dumps(CONVERSATION))
    done = run_case(tmp_path, "--modes", "bm25", "--api", "memory-stores", "databricks", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows: list[dict[str, Any]] = report["rows"]
    assert "1 conversations, 5 turns, 3 questions" in report["note"]
    for api in ("memory-stores", "databricks"):
        # the caption finds the okapi's turn (and session) first, "zebra" its only turn; no
        # turn has the lighthouse (the summary is not stored): a miss
        assert ranks(rows, api, "turn") == {0: 1, 1: None, 3: 1}
        assert ranks(rows, api, "session") == {0: 1, 1: None, 3: 1}
        assert scores(rows, api, "turn") == {
            "1-4": (3, 0.667, 0.667, 0.667),
            "1 multi-hop": (1, 0.0, 0.0, 0.0),
            "2 temporal": (1, 1.0, 1.0, 1.0),
            "3 open-domain": (0, 0.0, 0.0, 0.0),
            "4 single-hop": (1, 1.0, 1.0, 1.0),
        }
        cost = [r for r in rows if "memories" in r and r["api"] == api]
        assert [(r["granularity"], r["memories"], r["searches"]) for r in cost] == [
            ("turn", 5, 3),
            ("session", 2, 3),
        ]


def ranks(rows: list[dict[str, Any]], api: str, granularity: str) -> dict[int, int | None]:
    return {
        r["question"]: r["rank"]
        for r in rows
        if "rank" in r and (r["api"], r["granularity"]) == (api, granularity)
    }


def scores(
    rows: list[dict[str, Any]], api: str, granularity: str
) -> dict[str, tuple[int, float, float, float]]:
    return {
        r["category"]: (r["questions"], r["recall_at_5"], r["recall_at_10"], r["mrr_at_10"])
        for r in rows
        if "mrr_at_10" in r and (r["api"], r["granularity"]) == (api, granularity)
    }


def test_ranks_become_recall_and_mrr_by_category() -> None:
    """The scores from ranks the server would not give a tiny store: 2 and 7 (only the
    top 5 counts for recall@5), 0 (not in the top 10)."""
    asked = [
        Question("c", i, category, "?", frozenset(["D1:1"]))
        for i, category in enumerate([1, 1, 2, 4, 4])
    ]
    label = {"api": "a", "backend": "b", "mode": "m", "granularity": "g"}
    rows = quality(label, list(zip(asked, [1, 7, 0, 2, 1], strict=True)))
    assert [
        (r.category, r.questions, r.recall_at_5, r.recall_at_10, r.mrr_at_10) for r in rows
    ] == [
        ("1-4", 5, 0.6, 0.8, round((1 + 1 / 7 + 1 / 2 + 1) / 5, 3)),
        ("1 multi-hop", 2, 0.5, 1.0, round((1 + 1 / 7) / 2, 3)),
        ("2 temporal", 1, 0.0, 0.0, 0.0),
        ("3 open-domain", 0, 0.0, 0.0, 0.0),
        ("4 single-hop", 2, 1.0, 1.0, 0.75),
    ]
    holds = {"/a.md": frozenset(["D1:2"]), "/b.md": frozenset(["D1:1", "D1:3"])}
    assert hit_rank(["/a.md", "/x.md", "/b.md"], holds, asked[0]) == 3
    assert hit_rank(["/a.md"] * 10 + ["/b.md"], holds, asked[0]) == 0  # 11th: not in the top 10


def test_missing_data_is_one_line_that_says_how_to_point_at_it(tmp_path: Path) -> None:
    done = run_case(tmp_path / "absent")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "MEMFS_LOCOMO_DIR" in done.stderr and "--data" in done.stderr
