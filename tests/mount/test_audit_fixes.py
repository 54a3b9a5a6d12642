"""Fixes of an audit of the mount, each checked on a real mount.

Oversized writes leave nothing behind, refused files are kept and reported, errors go to the
writer only, the state directory is ours, journals and lock files do not pile up, and
``/.versions`` entries expire quickly.
"""

from __future__ import annotations

import base64
import errno
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kit.journals import journal_home, journal_records
from kit.mounts import MountedStore, daemon_alive, memfs
from kit.waiting import wait_for


def test_clean_umount_leaves_no_journal_or_lock_files(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    cache = tmp_path / "journals"
    m = mount_factory("--cache-dir", str(cache))
    (m.path / "a.md").write_text("a\n")
    m.settle()
    home = journal_home(cache, m.store_id, m.env["ANTHROPIC_BASE_URL"])
    assert home.is_dir()
    assert len(list(home.glob("journal-*.lock"))) <= 2  # the slot in use (and a probe)
    assert m.umount().returncode == 0
    assert list(home.iterdir()) == [home / "workspace.json"]  # which server, for the next mount
    # the fixtures keep journals out of ~/.cache
    assert m.env["XDG_CACHE_HOME"].startswith(str(tmp_path))


def test_versions_entries_expire_after_a_second(mount_factory: Callable[..., MountedStore]) -> None:
    m = mount_factory(memories={"/plan.md": "v1"})
    for content in ("v2 secret", "v3"):
        (m.path / "plan.md").write_text(content)
        m.settle()
    history = m.path / ".versions" / "history" / "plan.md"
    modified = sorted(os.listdir(history))[1]
    assert "-modified-" in modified
    assert (history / modified).read_text() == "v2 secret"  # the kernel now holds the entry
    middle = m.versions()[1]  # newest first: v3, v2, v1
    m.sdk.beta.memory_stores.memory_versions.redact(middle.id, memory_store_id=m.store_id)
    wait_for(lambda: modified + "-redacted" in os.listdir(history), timeout=4.0)
    # the old name disappears once its entry expires: 1 s, not the mount's 10 s
    wait_for(lambda: not os.path.lexists(history / modified), timeout=3.0)


def test_state_dir_must_be_private(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    m = mount_factory(mount=False)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    env = {**m.env, "XDG_RUNTIME_DIR": str(runtime)}
    state = runtime / "memfs"
    state.mkdir()
    state.chmod(0o777)
    args = ("mount", m.store_id, str(m.path), "--log-file", str(tmp_path / "x.log"))
    result = memfs(*args, env=env)
    assert result.returncode == 1 and not os.path.ismount(m.path)
    assert result.stderr.strip().splitlines() == [
        f"memfs mount: the state directory {state} is writable by other users"
    ]
    if os.getuid() == 0:  # someone else's directory (only root can make one here)
        state.chmod(0o700)
        os.chown(state, 65534, 65534)
        result = memfs(*args, env=env)
        assert result.returncode == 1 and "owned by uid 65534" in result.stderr
        assert not os.path.ismount(m.path)
    fresh = tmp_path / "runtime2"
    fresh.mkdir()
    result = memfs(*args, env={**env, "XDG_RUNTIME_DIR": str(fresh)})
    assert result.returncode == 0, result.stderr
    assert (fresh / "memfs").stat().st_mode & 0o777 == 0o700
    result = memfs("umount", str(m.path), env={**env, "XDG_RUNTIME_DIR": str(fresh)})
    assert result.returncode == 0, result.stderr
    wait_for(lambda: not os.path.ismount(m.path), timeout=10)


def test_umount_signals_only_the_daemon_of_that_mount(mount: MountedStore) -> None:
    from memfs.mount.daemon import state_path

    bystander = subprocess.Popen(["sleep", "60"])
    try:
        pid_file = state_path(str(mount.path), "pid")
        pid_file.write_text(f"{bystander.pid}\n{mount.path}\n")  # planted
        result = memfs("umount", str(mount.path), env=mount.env)
        assert f"process {bystander.pid}, which is not the memfs daemon" in result.stderr
        assert bystander.poll() is None  # not signalled
        wait_for(lambda: not os.path.ismount(mount.path), timeout=10)  # fusermount3 -u instead
    finally:
        bystander.kill()
        bystander.wait()


def test_read_only_mount_leaves_the_journal_untouched(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    cache = tmp_path / "journals"
    m = mount_factory("--cache-dir", str(cache), "--update-delay", "30", memories={"/a.md": "v1"})
    (m.path / "a.md").write_text("v2\n")
    (m.path / "new.md").write_text("new\n")
    assert journal_records(cache) == 2
    assert m.pid is not None
    os.kill(m.pid, signal.SIGKILL)
    wait_for(lambda: not daemon_alive(m.pid or 0), timeout=10)
    subprocess.run(["fusermount3", "-uz", str(m.path)], capture_output=True, check=False)
    wait_for(lambda: not os.path.ismount(m.path), timeout=10)
    before = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}

    result = m.mount("--read-only")
    assert result.returncode == 0, result.stderr
    assert (m.path / "a.md").read_text() == "v1"
    # a read-write mount replays before it serves (daemon.run): this one serves, so a replay
    # would have run by now; its status says what it did instead
    uploads = m.status()["uploads"]
    assert (uploads["untouched"], uploads["replayed"], uploads["pending"]) == (2, 0, 0)
    assert m.content("/a.md") == "v1" and m.content("/new.md") is None
    assert "2 write-back journal record(s) of an earlier mount" in m.log()
    assert "left untouched" in m.log()
    status = memfs("status", str(m.path), env=m.env)
    assert "2 journal record(s) of an earlier mount left untouched" in status.stdout
    assert m.umount().returncode == 0
    assert {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()} == before

    assert m.mount().returncode == 0  # read-write: the journal is replayed now
    m.wait_content("/a.md", "v2\n")
    m.wait_content("/new.md", "new\n")


def _queue_is_empty(m: MountedStore) -> bool:
    return m.status()["uploads"]["pending"] == 0


def _refused(m: MountedStore) -> list[str]:
    files: list[str] = m.status()["refused"]["files"]
    return files


def test_oversized_new_file_is_not_created(mount: MountedStore, tmp_path: Path) -> None:
    big = tmp_path / "b"
    big.write_bytes(base64.encodebytes(os.urandom(150_000)))
    result = subprocess.run(["cp", str(big), str(mount.path)], capture_output=True, text=True)
    assert result.returncode != 0 and "File too large" in result.stderr
    # every write was refused: nothing is created, here or in the store
    assert "b" not in os.listdir(mount.path)  # (a name the kernel cached may stay up to 10 s)
    mount.pass_marker()  # a new file would be uploaded 1 s after its close, before the marker
    assert "/b" not in mount.paths()
    assert "refused /b" in mount.log()
    wait_for(lambda: mount.status()["refused"]["count"] == 1, timeout=5)


def test_write_crossing_the_limit_uploads_nothing(
    mount_factory: Callable[..., MountedStore],
) -> None:
    m = mount_factory(memories={"/old.md": "previous\n"})
    fill = "head -c 102401 /dev/zero | tr '\\0' {1} > {0}/{2}"
    script = fill.format(m.path, "a", "x.md") + "; " + fill.format(m.path, "b", "old.md")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert result.stderr.count("File too large") == 2, result.stderr
    m.pass_marker()
    assert "/x.md" not in m.paths()  # not a truncated 102,400-byte memory
    assert m.content("/old.md") == "previous\n"  # the store keeps the previous content
    status = m.status()["refused"]
    assert status["count"] == 2 and status["files"] == ["/old.md", "/x.md"]
    text = memfs("status", str(m.path), env=m.env).stdout  # and in words, one line each
    assert "\n  refused: /old.md\n  refused: /x.md\n" in text, text
    # truncated and rewritten below the limit: an ordinary file again
    (m.path / "old.md").write_text("small\n")
    m.settle()
    assert m.content("/old.md") == "small\n"
    wait_for(lambda: m.status()["refused"]["files"] == ["/x.md"], timeout=5)
    result = m.umount()
    assert result.returncode == 1 and "refused /x.md" in result.stderr
    assert "/old.md" not in result.stderr
    # a refused file is never replayed: the report does not say it will be
    assert "1 file(s) refused by the store; never uploaded" in result.stderr
    assert "replayed at next mount" not in result.stderr


def test_every_refused_non_utf8_file_is_kept_and_reported(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    cache = tmp_path / "journals"
    m = mount_factory("--cache-dir", str(cache))
    fd = os.open(m.path / "made.bin", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"\xff")
    with pytest.raises(OSError) as caught:
        os.fsync(fd)
    assert caught.value.errno == errno.EILSEQ
    with pytest.raises(OSError):
        os.close(fd)
    subprocess.run(["bash", "-c", f"printf 'x\\xfe' > {m.path}/shell.bin"], check=True)
    result = m.umount()
    assert result.returncode == 1
    assert "made.bin" in result.stderr and "shell.bin" in result.stderr, result.stderr
    kept_dir = journal_home(cache, m.store_id, m.env["ANTHROPIC_BASE_URL"]) / "kept" / "journal-0"
    kept = {p.read_bytes() for p in kept_dir.iterdir()}
    assert kept == {b"\xff", b"x\xfe"}


def test_upload_errors_reach_the_writer_not_a_reader(mount: MountedStore) -> None:
    p = mount.path
    subprocess.run(["bash", "-c", f"echo hi > {p}/bin.dat; printf '\\xff' >> {p}/bin.dat"])
    # the upload queued by the first close fails in the background: nothing waits any more
    # and the content is refused
    wait_for(lambda: _queue_is_empty(mount) and _refused(mount) == ["/bin.dat"], timeout=10)
    grep = subprocess.run(["grep", "-r", "hi", str(p)], capture_output=True, text=True)
    assert grep.stderr == "", grep.stderr
    with open(p / "bin.dat", "rb") as reader:
        assert reader.read() == b"hi\n\xff"
    writer = open(p / "bin.dat", "ab")  # noqa: SIM115  (the writer's close hears of it)
    writer.write(b"\xff")
    with pytest.raises(OSError) as caught:
        writer.close()
    assert caught.value.errno == errno.EILSEQ


# -- refusals are about one content (issue 11, items 1-4) ---------------------------------------


def test_a_valid_save_after_efbig_uploads_and_fsync_tells_the_truth(
    mount_factory: Callable[..., MountedStore],
) -> None:
    m = mount_factory(memories={"/r.md": "v1\n"})
    r = m.path / "r.md"
    fd = os.open(r, os.O_RDWR)
    with pytest.raises(OSError) as caught:
        os.pwrite(fd, b"x", 200_000)
    assert caught.value.errno == errno.EFBIG
    os.close(fd)  # the refused write changed nothing: nothing is refused
    fd = os.open(r, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"v2\n")
    os.close(fd)
    fd = os.open(r, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"v3\n")
    os.fsync(fd)  # 0: the server has it
    assert m.content("/r.md") == "v1\nv2\nv3\n"
    os.close(fd)
    # a writer whose write crossed the limit after it wrote: its content is refused, and its
    # fsync and close say so
    fd = os.open(r, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"p" * 90_000)
    with pytest.raises(OSError) as caught:
        while True:  # the kernel may take the rest of a page first: a short write
            os.write(fd, b"q" * 20_000)
    assert caught.value.errno == errno.EFBIG
    left = os.fstat(fd).st_size
    for call in (os.fsync, os.close):
        with pytest.raises(OSError) as caught:
            call(fd)
        assert caught.value.errno == errno.EFBIG
    assert m.content("/r.md") == "v1\nv2\nv3\n"
    wait_for(lambda: m.status()["refused"]["files"] == ["/r.md"], timeout=5)
    # the next save of valid content ends the refusal and is uploaded as usual
    fd = os.open(r, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"end\n")
    os.fsync(fd)
    os.close(fd)
    content = m.content("/r.md") or ""
    assert len(content) == left + 4 and content.startswith("v1\nv2\nv3\n" + "p" * 90_000)
    assert content.endswith("end\n")
    wait_for(lambda: m.status()["refused"]["files"] == [], timeout=5)
    assert m.umount().returncode == 0


def test_a_refusal_is_not_reported_to_the_next_writer(
    mount_factory: Callable[..., MountedStore],
) -> None:
    m = mount_factory()
    subprocess.run(["bash", "-c", f"printf '\\xff\\xfe' > {m.path}/s1"], check=True)
    m.pass_marker()
    assert "/s1" not in m.paths()
    with open(m.path / "s1", "w") as writer:  # a valid save: its close succeeds
        writer.write("ok\n")
    m.settle()
    assert m.content("/s1") == "ok\n"
    wait_for(lambda: m.status()["refused"]["files"] == [], timeout=5)


def test_every_open_for_writing_hears_that_the_current_content_is_refused(
    mount_factory: Callable[..., MountedStore],
) -> None:
    """close, like fsync, never returns 0 for content the server does not get, whoever's open
    for writing it is; a reader hears nothing, nor does a writer whose own save is valid."""
    m = mount_factory(memories={"/big.md": "v1\n"})
    p = m.path
    subprocess.run(["bash", "-c", f"printf '\\xff\\xfe' > {p}/s1"], check=True)
    fd = os.open(p / "big.md", os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"p" * 90_000)
    with pytest.raises(OSError) as caught:
        while True:  # the kernel may take the rest of a page first: a short write
            os.write(fd, b"q" * 20_000)
    assert caught.value.errno == errno.EFBIG
    with pytest.raises(OSError):
        os.close(fd)
    for name, number in (("s1", errno.EILSEQ), ("big.md", errno.EFBIG)):
        untouched = os.open(p / name, os.O_WRONLY)  # an open for writing that changes nothing
        for call in (os.fsync, os.close):
            with pytest.raises(OSError) as caught:
                call(untouched)
            assert caught.value.errno == number, (name, call)
        reader = os.open(p / name, os.O_RDONLY)
        assert os.read(reader, 2) in (b"\xff\xfe", b"v1")
        os.fsync(reader)
        os.close(reader)
    with open(p / "s1", "w") as writer:  # a valid save: its close succeeds, it is uploaded
        writer.write("ok\n")
    m.settle()
    assert m.content("/s1") == "ok\n"
    assert m.content("/big.md") == "v1\n"


def test_refused_content_is_never_replayed_and_its_copy_goes_with_it(
    mount_factory: Callable[..., MountedStore], tmp_path: Path
) -> None:
    cache = tmp_path / "journals"
    m = mount_factory("--cache-dir", str(cache), memories={"/old.md": "old\n"})
    p = m.path
    for name in ("e2", "gone", "fixed", "old.md"):
        subprocess.run(["bash", "-c", f"printf '\\xff\\xfe' > {p}/{name}"], check=True)
    m.pass_marker()
    # the mount's journal slot's
    kept = journal_home(cache, m.store_id, m.env["ANTHROPIC_BASE_URL"]) / "kept" / "journal-0"
    assert len(list(kept.iterdir())) == 4
    os.unlink(p / "gone")  # removed: its copy goes
    (p / "fixed").write_text("valid now\n")  # saved validly: its copy goes, it is uploaded
    m.settle()
    assert m.content("/fixed") == "valid now\n"
    assert sorted(path.read_bytes() for path in kept.iterdir()) == [b"\xff\xfe"] * 2
    wait_for(lambda: m.status()["refused"]["files"] == ["/e2", "/old.md"], timeout=5)
    assert journal_records(cache) == 0  # refused content is not in the journal
    result = m.umount()
    assert result.returncode == 1
    report = [line.strip() for line in result.stderr.splitlines()]
    assert [line.split(":")[0] for line in report if line.startswith("refused ")] == [
        "refused /e2",
        "refused /old.md",
    ]
    assert "replayed at next mount" not in result.stderr, result.stderr
    assert m.mount().returncode == 0  # the next mount replays nothing
    assert "replaying" not in m.log()
    assert m.paths() == {"/old.md", "/fixed", "/marker.md"}
    assert m.content("/old.md") == "old\n"


def test_a_failed_truncate_changes_nothing(mount_factory: Callable[..., MountedStore]) -> None:
    m = mount_factory()
    t = m.path / "t"
    subprocess.run(["bash", "-c", f"printf 'a\\xff\\xfe' > {t}"], check=True)
    with pytest.raises(OSError) as caught:
        os.truncate(t, 2)  # still not UTF-8: refused, and nothing changes
    assert caught.value.errno == errno.EILSEQ
    assert os.stat(t).st_size == 3
    assert t.read_bytes() == b"a\xff\xfe"
    os.truncate(t, 1)  # valid text: the refusal ends, the content is uploaded
    assert os.stat(t).st_size == 1
    m.settle()
    assert m.content("/t") == "a"
    wait_for(lambda: m.status()["refused"]["files"] == [], timeout=5)
