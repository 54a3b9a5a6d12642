"""Whether this process can mount: ``why_no_mount``, for ``memfs session`` to choose synced
directories (``memfs.session.synced``) where it cannot. Standard library only: the command
asks before it imports anything heavy."""

from __future__ import annotations

import os
import shutil

FUSE_DEVICE = "/dev/fuse"


def why_no_mount(pyfuse3_missing: bool) -> str | None:
    """Why a FUSE mount is not possible here, in a few words; None if it is. Looked for: the
    device (absent in the default Docker and Kubernetes pod), the right to open it, the setuid
    helper an ordinary user mounts with, and the binding."""
    if pyfuse3_missing:
        return "pyfuse3 is not installed"
    if not os.path.exists(FUSE_DEVICE):
        return f"no {FUSE_DEVICE}"
    if not os.access(FUSE_DEVICE, os.R_OK | os.W_OK):
        return f"{FUSE_DEVICE} cannot be opened by this user"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (an ordinary user mounts with it)"
    return None
