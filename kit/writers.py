"""A program that writes to files of a mount and keeps them open: ``HeldWriter``.

It runs in a process of its own. The test process must not hold the files itself: every
subprocess it starts (``memfs umount``, ``fusermount3``) would inherit the descriptors, and the
close of those copies at ``exec`` is a FUSE flush, which commits the content as a close would.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from types import TracebackType

PROGRAM = r"""
import json, mmap, os, sys

FLAGS = {
    "new": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "append": os.O_WRONLY | os.O_APPEND,
    "rdwr": os.O_RDWR,
}
fds, maps = [], []
if sys.argv[2]:  # its command name (``comm``), as any process may choose it
    with open("/proc/self/comm", "w") as comm:
        comm.write(sys.argv[2])
for path, flags in json.loads(sys.argv[1]):
    fds.append(os.open(path, FLAGS[flags], 0o644))
print("open", flush=True)
for line in sys.stdin:
    order = json.loads(line)
    fd = fds[order["file"]]
    data = order["data"].encode("latin-1")
    if order["how"] == "write":
        os.write(fd, data)
    elif order["how"] == "map":  # a shared writable mapping, changed in place, never synced
        pages = mmap.mmap(fd, len(data))
        pages[:] = data
        maps.append(pages)
    elif order["how"] == "close":
        try:
            os.close(fd)
            print("closed", flush=True)
        except OSError as exc:
            print(f"close: {exc.strerror}", flush=True)
        continue
    print("done", flush=True)
"""


class HeldWriter:
    """A process holding ``files`` (path, ``new``/``append``/``rdwr``) open, named ``command``
    (default: its interpreter's); ``write``, ``map`` and ``close`` act on one of them (by index)
    and return once done. Leaving the ``with`` block kills it (its descriptors close: whatever
    the mount is by then)."""

    def __init__(self, files: list[tuple[Path, str]], *, command: str = "") -> None:
        opened = json.dumps([(str(p), f) for p, f in files])
        argv = [sys.executable, "-c", PROGRAM, opened, command]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._expect("open")

    @property
    def pid(self) -> int:
        return self.process.pid

    def _order(self, how: str, file: int, data: bytes = b"") -> str:
        assert self.process.stdin is not None
        order = {"how": how, "file": file, "data": data.decode("latin-1")}
        self.process.stdin.write(json.dumps(order) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def _expect(self, word: str) -> None:
        answer = self._answer()
        assert answer == word, f"the writer said {answer!r} (exit {self.process.poll()})"

    def write(self, file: int, data: bytes) -> None:
        assert self._order("write", file, data) == "done"

    def map(self, file: int, data: bytes) -> None:
        """Replace the first ``len(data)`` bytes of ``file`` through a shared mapping."""
        assert self._order("map", file, data) == "done"

    def close(self, file: int) -> str:
        """``closed``, or ``close: <strerror>``."""
        return self._order("close", file)

    def __enter__(self) -> HeldWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
