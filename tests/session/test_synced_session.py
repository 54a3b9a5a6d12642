"""Sessions without FUSE: ``memfs session --sync``, and the choice made by itself where a mount
is not possible (an ordinary user without fusermount3). The stores are directories kept in step
under ROOT; stop uploads, removes the copies and ROOT."""

from __future__ import annotations

import json
import shlex
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit.waiting import wait_for
from memfs.session.fuse_check import why_no_mount

from .helpers import Api, mounts_under, run_memfs, slug_of, unique, write_config


def test_a_synced_session_of_two_stores(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    notes = api.create_store(unique("Notes"))
    rules = api.create_store(unique("Rules"))
    api.create_memory(notes["id"], "/todo.md", "buy milk\n")
    api.create_memory(rules["id"], "/tone.md", "be brief\n")
    config = write_config(
        tmp_path / "session.json",
        [
            {"type": "memory_store", "memory_store_id": notes["id"]},
            {"type": "memory_store", "memory_store_id": rules["id"], "access": "read_only"},
        ],
    )
    done = run_memfs(
        ["session", "--config", str(config), "--root", str(root), "--detach", "--sync"],
        session_env,
    )
    assert done.returncode == 0, done.stderr
    assert "copies kept in step with the store" in done.stdout  # the prompt says what they are
    assert ".versions" not in done.stdout and ".search" not in done.stdout
    assert mounts_under(root) == []  # nothing mounted
    n, r = root / slug_of(notes["name"]), root / slug_of(rules["name"])
    assert (n / "todo.md").read_text() == "buy milk\n"
    assert (r / "tone.md").read_text() == "be brief\n"
    assert stat.S_IMODE((r / "tone.md").stat().st_mode) == 0o444  # read-only store
    (n / "learned.md").write_text("the sky is blue\n")
    wait_for(lambda: "/learned.md" in api.memories(notes["id"]))
    api.create_memory(notes["id"], "/remote.md", "from elsewhere\n")
    wait_for(lambda: (n / "remote.md").exists())
    status = run_memfs(["session", "status", "--root", str(root), "--json"], session_env)
    assert status.returncode == 0, status.stderr
    stores = json.loads(status.stdout)["mounts"]
    assert {store["health"] for store in stores} == {"ok"}, stores

    def uploads() -> int:
        one = run_memfs(["status", str(n), "--json"], session_env)
        assert one.returncode == 0, one.stderr
        return int(json.loads(one.stdout)["sync"]["uploads"])

    wait_for(lambda: uploads() >= 1)  # its own status, published every second
    (n / "last.md").write_text("written just before stop\n")
    stop = run_memfs(["session", "stop", "--root", str(root)], session_env, timeout=90)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not root.exists()  # the copies and ROOT removed, everything uploaded first
    memories = api.memories(notes["id"])
    assert memories["/last.md"]["content"] == "written just before stop\n"
    assert set(api.memories(rules["id"])) == {"/tone.md"}


def test_stop_keeps_what_the_store_does_not_have(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    notes = api.create_store(unique("Notes"))
    config = write_config(
        tmp_path / "session.json", [{"type": "memory_store", "memory_store_id": notes["id"]}]
    )
    done = run_memfs(
        ["session", "--config", str(config), "--root", str(root), "--detach", "--sync"],
        session_env,
    )
    assert done.returncode == 0, done.stderr
    n = root / slug_of(notes["name"])
    (n / "binary.dat").write_bytes(b"\xff\xfe not text")
    (n / "kept.md").write_text("uploaded\n")
    wait_for(lambda: "/kept.md" in api.memories(notes["id"]))
    stop = run_memfs(["session", "stop", "--root", str(root)], session_env, timeout=90)
    assert stop.returncode == 1  # something was not saved: said, and kept
    assert "binary.dat" in stop.stderr
    assert (n / "binary.dat").read_bytes() == b"\xff\xfe not text"
    assert not (n / "kept.md").exists()  # in the store: its copy went


def test_why_no_mount_names_what_is_missing() -> None:
    assert why_no_mount(True) == "pyfuse3 is not installed"
    assert why_no_mount(False) is None  # root, /dev/fuse here: a mount is possible


WHY_NO_MOUNT = "from memfs.session.fuse_check import why_no_mount; print(why_no_mount(False))"
NOBODY = ["--reuid", "65534", "--regid", "65534", "--clear-groups"]


@pytest.mark.parametrize(
    ("confined", "why"),
    [
        ([], "None"),
        # `docker run --device /dev/fuse` without `--cap-add SYS_ADMIN`: root may not mount
        (["--bounding-set", "-sys_admin"], "mounting is not permitted (no CAP_SYS_ADMIN)"),
        (NOBODY, "None"),  # an ordinary user mounts through the setuid fusermount3 ...
        # ... which gains nothing under no_new_privs (allowPrivilegeEscalation: false)
        (
            [*NOBODY, "--no-new-privs"],
            "mounting is not permitted (no_new_privs: fusermount3 cannot act as root)",
        ),
    ],
    ids=["root", "root-without-sys-admin", "user", "user-no-new-privs"],
)
def test_why_no_mount_sees_whether_this_process_may_mount(confined: list[str], why: str) -> None:
    seen = subprocess.run(
        ["setpriv", *confined, sys.executable, "-c", WHY_NO_MOUNT],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.strip() == why


def _one_store(api: Api, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """A store holding /todo.md, and a session config of it alone."""
    notes = api.create_store(unique("Notes"))
    api.create_memory(notes["id"], "/todo.md", "buy milk\n")
    config = write_config(
        tmp_path / "session.json", [{"type": "memory_store", "memory_store_id": notes["id"]}]
    )
    return notes, config


def _without_dev_fuse(argv: list[str]) -> list[str]:
    """As in the default Docker or Kubernetes pod: a /dev of its own, without fuse."""
    own_dev = "mount -t tmpfs none /dev && mknod -m 666 /dev/null c 1 3"
    return ["unshare", "--mount", "sh", "-c", f"{own_dev} && exec {shlex.join(argv)}"]


def _without_sys_admin(argv: list[str]) -> list[str]:
    """As `docker run --device /dev/fuse` without `--cap-add SYS_ADMIN`: /dev/fuse is there,
    but CAP_SYS_ADMIN is not, for this root nor for a setuid fusermount3."""
    return ["setpriv", "--bounding-set", "-sys_admin", *argv]


@pytest.mark.parametrize(
    ("confine", "why"),
    [
        (_without_dev_fuse, "no /dev/fuse"),
        (_without_sys_admin, "mounting is not permitted (no CAP_SYS_ADMIN)"),
    ],
    ids=["no-dev-fuse", "no-sys-admin"],
)
def test_a_container_that_cannot_mount_gets_synced_directories(
    tmp_path: Path,
    root: Path,
    session_env: dict[str, str],
    api: Api,
    confine: Callable[[list[str]], list[str]],
    why: str,
) -> None:
    notes, config = _one_store(api, tmp_path)
    started = subprocess.run(
        confine([sys.executable, "-m", "memfs", "session", "--config", str(config),
                 "--root", str(root), "--detach"]),
        env=session_env, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    fallback = (
        f"cannot mount here ({why}); the stores are directories kept in step instead (memfs sync)"
    )
    said = [line for line in started.stderr.splitlines() if "cannot mount" in line]
    assert said == [f"memfs session: {fallback}"]  # said once, with why
    log_file = Path(started.stderr.rpartition("log ")[2].partition(")")[0])
    logged = [line for line in log_file.read_text().splitlines() if "cannot mount" in line]
    assert len(logged) == 1 and logged[0].endswith(fallback), logged  # in the session's log too
    n = root / slug_of(notes["name"])
    assert (n / "todo.md").read_text() == "buy milk\n"
    assert mounts_under(root) == []
    (n / "learned.md").write_text("no mount needed\n")
    stopped = run_memfs(["session", "stop", "--root", str(root)], session_env, timeout=90)
    assert stopped.returncode == 0, stopped.stderr
    assert not root.exists()
    assert api.memories(notes["id"])["/learned.md"]["content"] == "no mount needed\n"


WITHOUT_PYFUSE3 = """
import sys
sys.modules["pyfuse3"] = None  # as where it is not installed (macOS, a slim image)
from memfs.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_pyfuse3_a_foreground_session_syncs(
    tmp_path: Path, root: Path, session_env: dict[str, str], api: Api
) -> None:
    notes, config = _one_store(api, tmp_path)
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", WITHOUT_PYFUSE3, "session", "--config", str(config),
             "--root", str(root)],
            env=session_env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        wait_for(lambda: "# Memory" in out.read_text() or child.poll() is not None, timeout=30)
        assert child.poll() is None, err.read_text()
        assert "cannot mount here (pyfuse3 is not installed)" in err.read_text()
        n = root / slug_of(notes["name"])
        assert (n / "todo.md").read_text() == "buy milk\n"
        (n / "done.md").write_text("milk bought\n")
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 0, err.read_text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert api.memories(notes["id"])["/done.md"]["content"] == "milk bought\n"
    assert not root.exists()
    assert "Traceback" not in err.read_text()
