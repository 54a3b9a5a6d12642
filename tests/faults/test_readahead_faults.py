"""A cold ``grep -r``-like walk through a real mount while the server fails some reads: the walk
readahead and its fallbacks (single retrieves, basic listings) still serve every file right."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.mounts import MountedStore


def walk_and_read(root: Path) -> dict[str, str]:
    """Depth-first in readdir order, reading every file (what grep -r does)."""
    out: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(directory) / name
            out["/" + path.relative_to(root).as_posix()] = path.read_text()
    return out


def test_walk_through_failing_reads_serves_every_file(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore]
) -> None:
    memories = {
        f"/t{d:02}/n{n:02}.md": f"note {d} {n}\n" * (n + 1) for d in range(8) for n in range(25)
    }
    mounted = faulty_mount(memories=memories)
    faulty_server.set_faults("error=0.1,overload=0.05,methods=GET,seed=3")
    try:
        got = walk_and_read(mounted.path)
        counts = faulty_server.faults()["counts"]
    finally:
        faulty_server.set_faults("none")
    assert counts.get("error", 0) + counts.get("overload", 0) > 0  # the faults really happened
    assert got == memories
