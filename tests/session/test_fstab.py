"""The mount(8) helper contrib/mount.fuse.memfs: option translation, refusals, a real mount."""

from __future__ import annotations

import errno
import importlib.machinery
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from memfs.api.config import shown_url

from .helpers import Api, mounts_under, run_memfs, unique

HELPER = Path(__file__).resolve().parents[2] / "contrib" / "mount.fuse.memfs"
MEMFS = str(Path(sys.executable).with_name("memfs"))


def helper(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": "/usr/bin:/bin", "MEMFS": MEMFS} if env is None else env
    return subprocess.run(
        [sys.executable, str(HELPER), *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_fstab_options_become_memfs_mount_arguments() -> None:
    done = helper(
        "memstore_abc", "/mnt/memory/notes", "-o",
        "api_key_file=/etc/memfs/key,base_url=http://10.0.0.1:8080,ro,_netdev,nofail,"
        "x-systemd.automount,session_id=sesn_1,debug", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"ANTHROPIC_BASE_URL=http://10.0.0.1:8080 {MEMFS} mount memstore_abc /mnt/memory/notes "
        "--api-key-file /etc/memfs/key --read-only --session-id sesn_1 --debug\n"
    )


def test_dry_run_masks_the_password_of_a_base_url() -> None:
    url = "http://agent:s3cret@10.0.0.1:8080/v1"
    done = helper("memstore_abc", "/mnt/x", "-o", f"api_key_file=/k,base_url={url}", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    assert done.stdout.startswith("ANTHROPIC_BASE_URL=http://agent:***@10.0.0.1:8080/v1 ")
    # ... from the environment too, and on stderr with -v (then it mounts: no memfs here)
    env = {"PATH": "/usr/bin:/bin", "MEMFS": "/bin/true", "ANTHROPIC_BASE_URL": url}
    done = helper("memstore_abc", "/mnt/x", "-v", "-o", "api_key_file=/k", env=env)
    assert done.returncode == 0 and "s3cret" not in done.stdout + done.stderr
    assert "ANTHROPIC_BASE_URL=http://agent:***@10.0.0.1:8080/v1 " in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "http://u:pw@h:1/p?q=a@b#f",
        "https://token@h",
        "http://h:8080",
        "http://u:p:w@h/",
        "http://a@b:c@h",
        "no-scheme:pw@h",
    ],
)
def test_the_helper_masks_urls_as_memfs_does(url: str) -> None:
    loader = importlib.machinery.SourceFileLoader("mount_fuse_memfs", str(HELPER))
    module = types.ModuleType(loader.name)
    loader.exec_module(module)
    assert module.shown_url(url) == shown_url(url)


def test_allow_other_passes_through() -> None:
    done = helper("memstore_abc", "/mnt/x", "-o", "api_key_file=/k,allow_other", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{MEMFS} mount memstore_abc /mnt/x --api-key-file /k --allow-other\n"


def test_owner_options_of_sshfs_become_memfs_mount_arguments() -> None:
    done = helper(
        "memstore_abc", "/mnt/x", "-o",
        "api_key_file=/k,allow_other,uid=1000,gid=agents,umask=027,default_permissions",
        "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"{MEMFS} mount memstore_abc /mnt/x --api-key-file /k --allow-other --uid 1000 "
        "--gid agents --umask 027\n"
    )


def test_the_memfs_hash_store_form_is_accepted() -> None:
    done = helper("memfs#Team Notes", "/mnt/x", "-o", "api_key_file=/k,rw,dev,suid", "--dry-run")
    assert done.stdout == f"{MEMFS} mount Team Notes /mnt/x --api-key-file /k\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("api_key_file=/k,cache=yes", "unknown mount option 'cache'"),
        ("api_key_file=", "option api_key_file needs a value"),
        ("api_key_file=/k,uid=", "option uid needs a value"),
        ("ro", "no API key: add -o api_key_file=FILE"),
    ],
)
def test_bad_options_are_refused_naming_the_option(options: str, message: str) -> None:
    done = helper("memstore_abc", "/mnt/x", "-o", options, "--dry-run")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("mount.fuse.memfs: ") and message in done.stderr


@pytest.mark.fuse
def test_helper_mounts_read_only_with_a_key_file(tmp_path: Path, server: Any, api: Api) -> None:
    store = api.create_store(unique("Fstab"))
    api.create_memory(store["id"], "/hello.md", "hi\n")
    key_file = tmp_path / "key"
    key_file.write_text(server.api_key + "\n")
    key_file.chmod(0o600)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    base_url = server.base_url
    env = {"PATH": "/usr/bin:/bin", "MEMFS": MEMFS}  # as mount(8) runs it: no API key in env
    try:
        done = helper(
            store["id"], str(mountpoint), "-o", f"api_key_file={key_file},base_url={base_url},ro",
            env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert mounts_under(mountpoint) == [str(mountpoint)]
        assert (mountpoint / "hello.md").read_text() == "hi\n"
        with pytest.raises(OSError) as info:
            (mountpoint / "new.md").write_text("x")
        assert info.value.errno == errno.EROFS
        assert run_memfs(["umount", str(mountpoint)], dict(os.environ)).returncode == 0
        assert mounts_under(mountpoint) == []
    finally:
        if mounts_under(mountpoint):
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)
