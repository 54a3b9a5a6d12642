"""The owner of a mount's files: the store has no owners or modes, so a mount shows these.

``Owner`` is what ``memfs mount --uid/--gid/--umask`` and a session's plan give a mount; the
parsers turn a name or a number into an id, and a bad value into a one-line ``ConfigError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memfs.api.config import ConfigError

DEFAULT_UMASK = 0o022  # memories 0644, directories 0755


@dataclass(frozen=True)
class Owner:
    """Owner and default modes of the files of a mount (``--uid``, ``--gid``, ``--umask``).

    None: the mounting user's uid or gid. Files the mount makes take their creator's instead,
    and ``chmod``/``chown`` change them, for the mount's lifetime (docs/semantics.md).
    """

    uid: int | None = None
    gid: int | None = None
    umask: int = DEFAULT_UMASK

    def mount_arguments(self) -> list[str]:
        """The ``memfs mount`` options that give a mount this owner."""
        args = [] if self.uid is None else ["--uid", str(self.uid)]
        args += [] if self.gid is None else ["--gid", str(self.gid)]
        if self.umask != DEFAULT_UMASK:
            args += ["--umask", f"{self.umask:04o}"]
        return args


def parse_uid(value: object) -> int:
    """A user id from a number or a user name (``--uid``, ``uid=``)."""
    return _parse_id(value, "user")


def parse_gid(value: object) -> int:
    """A group id from a number or a group name (``--gid``, ``gid=``)."""
    return _parse_id(value, "group")


def _parse_id(value: object, kind: Literal["user", "group"]) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    elif isinstance(value, str) and value.strip():
        import grp
        import pwd

        try:
            if kind == "user":
                return pwd.getpwnam(value.strip()).pw_uid
            return grp.getgrnam(value.strip()).gr_gid
        except KeyError:
            raise ConfigError(f"no {kind} named {value.strip()!r} on this machine") from None
    else:
        raise ConfigError(f"a {kind} must be a name or a number, not {value!r}")
    if not 0 <= number < 2**32 - 1:
        raise ConfigError(f"{kind} id {number} is out of range")
    return number


def parse_umask(value: object) -> int:
    """A umask in octal (``022``, ``0027``, ``0o077``): the bits new default modes lack."""
    text = value.strip() if isinstance(value, str) else ""
    digits = text[2:] if text.lower().startswith("0o") else text
    if not digits or any(ch not in "01234567" for ch in digits) or int(digits, 8) > 0o777:
        raise ConfigError(f"umask {value!r} is not an octal number from 000 to 777 (e.g. 022)")
    return int(digits, 8)
