"""A running session's identity: its id, and the state file by which ``memfs session stop``
and ``status`` find it (kept outside the root, away from agents; replaced atomically)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import string
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memfs.contract.paths import slug
from memfs.host.private import replace_file
from memfs.session.config import SessionError

log = logging.getLogger(__name__)

STATE_DIR_ENV = "MEMFS_STATE_DIR"
SESSION_ID_PREFIX = "sesn_"
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,127}")
_ID_ALPHABET = string.ascii_letters + string.digits


def new_session_id() -> str:
    """``sesn_`` and 24 random base62 characters (about 143 bits)."""
    return SESSION_ID_PREFIX + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it can travel in a header, else raise SessionError."""
    if not _SESSION_ID.fullmatch(session_id):
        raise SessionError([f"session id {session_id!r} must be 1-128 letters, digits, '_' or '-'"])
    return session_id


# ---------------------------------------------------------------------------------------------
# The state file: how `memfs session stop` and `status` find a running session


def state_dir() -> Path:
    """Where state files live: $MEMFS_STATE_DIR, else /run/memfs as root, else per user."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    if os.geteuid() == 0:
        return Path("/run/memfs")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "memfs"
    return Path(f"/tmp/memfs-{os.geteuid()}")


def state_path(root: Path) -> Path:
    """The state file of the session at ``root`` (kept outside the root, away from agents)."""
    absolute = Path(os.path.abspath(root))
    digest = hashlib.sha256(str(absolute).encode("utf-8")).hexdigest()[:16]
    return state_dir() / f"session-{slug(absolute.name) or 'root'}-{digest}.json"


@dataclass
class SessionState:
    """What a running (or finished) session tells ``memfs session stop`` and ``status``; ``pid``
    is the process that serves every store (``memfs.session.runner``)."""

    pid: int
    root: str
    session_id: str
    status: str  # "starting", "running", "stopping", "stopped"
    mounts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # what its stop tells that is no problem: files open for writing then, and where they went
    notes: list[str] = field(default_factory=list)
    log_file: str | None = None
    created_root: bool = False  # the session made the root: removed when it ends

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionState:
        return cls(
            pid=int(data["pid"]),
            root=str(data["root"]),
            session_id=str(data["session_id"]),
            status=str(data["status"]),
            mounts=list(data.get("mounts") or []),
            problems=[str(p) for p in data.get("problems") or []],
            notes=[str(n) for n in data.get("notes") or []],
            log_file=data.get("log_file"),
            created_root=bool(data.get("created_root")),
        )

    def write(self, path: Path) -> None:
        """Replace the state file atomically (readers never see half a file); ``OSError``
        (``memfs.host.private.NotPrivateError`` included) if it cannot."""
        data = (json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8")
        replace_file(path, data, "session state", create_mode=0o700)

    @classmethod
    def read(cls, path: Path) -> SessionState | None:
        """The state at ``path``, or None when there is none (or it is unreadable)."""
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable session state %s: %s", path, exc)
            return None


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists (zombies of our own children count as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True
