"""Whether this process can mount: ``why_no_mount``, for ``memfs session`` to choose synced
directories (``memfs.session.synced``) where it cannot. Standard library only: the command
asks before it imports anything heavy.

Read from the process's real conditions, which a test creates with ``unshare`` and ``setpriv``:
the device, the right to open it, and the right to mount. Mounting FUSE takes CAP_SYS_ADMIN,
either this process's own (root, or any user in a user namespace it owns) or the setuid
``fusermount3``'s, which gets it only where the capability bounding set still holds it (the
default Docker container drops it: ``--device /dev/fuse`` without ``--cap-add SYS_ADMIN``) and
``no_new_privs`` is off (Kubernetes' ``allowPrivilegeEscalation: false`` sets it). Not seen: a
security module (AppArmor, SELinux) that refuses the mount itself; that session fails to mount,
saying so, as before.
"""

from __future__ import annotations

import os
import shutil
import stat

FUSE_DEVICE = "/dev/fuse"
PROCESS_STATUS = "/proc/self/status"  # Linux: the process's capabilities and no_new_privs
CAP_SYS_ADMIN = 21  # linux/capability.h


def why_no_mount(pyfuse3_missing: bool) -> str | None:
    """Why a FUSE mount is not possible here, in a few words; None if it is. Looked for: the
    binding, the device (absent in the default Docker and Kubernetes pod), the right to open
    it, and the right to mount (module docstring)."""
    if pyfuse3_missing:
        return "pyfuse3 is not installed"
    if not os.path.exists(FUSE_DEVICE):
        return f"no {FUSE_DEVICE}"
    if not os.access(FUSE_DEVICE, os.R_OK | os.W_OK):
        return f"{FUSE_DEVICE} cannot be opened by this user"
    return _why_not_permitted()


def _why_not_permitted() -> str | None:
    fields = _process_status()
    if fields is None:  # no /proc (another kernel): only what the user id tells
        return None if os.geteuid() == 0 else _why_not_fusermount(fields)
    if _has_sys_admin(fields.get("CapEff")):
        return None  # this process mounts by itself
    return _why_not_fusermount(fields)


def _why_not_fusermount(fields: dict[str, str] | None) -> str | None:
    """Why the setuid ``fusermount3`` cannot mount for this process; None if it can."""
    helper = shutil.which("fusermount3")
    if helper is None:
        if os.geteuid() == 0:
            return "mounting is not permitted (no CAP_SYS_ADMIN)"
        return "fusermount3 is not installed (an ordinary user mounts with it)"
    try:
        info = os.stat(helper)
    except OSError:
        return "fusermount3 cannot be run"
    if not (info.st_mode & stat.S_ISUID and info.st_uid == 0):
        return "mounting is not permitted (fusermount3 is not setuid root)"
    if fields is None:
        return None
    if fields.get("NoNewPrivs", "0").strip() != "0":
        return "mounting is not permitted (no_new_privs: fusermount3 cannot act as root)"
    if not _has_sys_admin(fields.get("CapBnd")):
        return "mounting is not permitted (no CAP_SYS_ADMIN)"
    return None


def _process_status() -> dict[str, str] | None:
    """The fields of ``/proc/self/status`` (None where there is none)."""
    try:
        with open(PROCESS_STATUS, encoding="ascii", errors="replace") as status:
            lines = status.read().splitlines()
    except OSError:
        return None
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return fields


def _has_sys_admin(mask: str | None) -> bool:
    """Whether a capability set of ``/proc/self/status`` (hex) holds CAP_SYS_ADMIN (an
    unreadable one is taken to: the mount then says what is wrong)."""
    try:
        return mask is None or bool(int(mask, 16) >> CAP_SYS_ADMIN & 1)
    except ValueError:
        return True
