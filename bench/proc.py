"""What ``/proc`` says about a process the benchmarks measure: its CPU time and its memory."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system (kernel) CPU seconds of every thread of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of every thread of ``pid`` so far."""
    return sum(cpu_times(pid))


def rss_kib(pid: int) -> int:
    """The resident set of ``pid`` (VmRSS), in KiB; 0 once it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def smaps_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of ``pid`` in KiB, from ``/proc/PID/smaps_rollup``; zeros once it is gone."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("Rss", "Pss"):
                fields[name] = int(rest.split()[0])
    return fields.get("Rss", 0), fields.get("Pss", 0)
