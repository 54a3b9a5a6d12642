"""Everyday tools on a real mount: cp, cp -p, rsync -a, tar, git, grep -r, find, mv, touch, >, >>.

Each tool runs for real on a ``memfs mount`` of the session's server; the store is checked through
the official SDK: every save is one new version of the same memory, and nothing a tool keeps for
itself (rsync's and tar's temp names, ``.git/``) reaches the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

from kit.mounts import MountedStore, memfs
from kit.waiting import wait_for

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "memfs test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "memfs test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        list(args),
        cwd=cwd,
        env=dict(os.environ, **(env or {})),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, f"{args}: {result.stderr}"
    return result.stdout


def operations(m: MountedStore, memory_id: str) -> list[str]:
    return [v.operation for v in m.versions(memory_id)]


def make_tree(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def test_cp_new_and_over_existing(mount_factory, tmp_path):
    m = mount_factory(memories={"/old.md": "old\n"})
    memory_id = m.memories()["/old.md"].id
    make_tree(tmp_path / "src", {"new.md": "new\n", "old.md": "replaced\n"})
    run("cp", str(tmp_path / "src" / "new.md"), str(m.path / "new.md"))
    run("cp", str(tmp_path / "src" / "old.md"), str(m.path / "old.md"))  # in place
    m.settle()
    wait_for(lambda: m.paths() == {"/new.md", "/old.md"}, timeout=5)
    assert m.content("/new.md") == "new\n"
    assert m.memories()["/old.md"].id == memory_id
    assert m.content("/old.md") == "replaced\n"
    assert operations(m, memory_id) == ["modified", "created"]


def test_cp_p_keeps_times_locally_one_version(mount_factory, tmp_path):
    m = mount_factory(memories={"/a.md": "a\n"})
    memory_id = m.memories()["/a.md"].id
    make_tree(tmp_path / "src", {"a.md": "a2\n", "b.md": "b\n"})
    for name in ("a.md", "b.md"):
        os.utime(tmp_path / "src" / name, (1_500_000_000, 1_500_000_000))
        os.chmod(tmp_path / "src" / name, 0o600)
    run("cp", "-p", str(tmp_path / "src" / "a.md"), str(tmp_path / "src" / "b.md"), str(m.path))
    for name in ("a.md", "b.md"):
        st = os.stat(m.path / name)
        assert st.st_mtime == 1_500_000_000  # kept by the daemon
        assert st.st_mode & 0o777 == 0o600  # the source's mode, kept locally
    m.settle()
    wait_for(lambda: m.paths() == {"/a.md", "/b.md"}, timeout=5)
    assert operations(m, memory_id) == ["modified", "created"]
    assert m.content("/b.md") == "b\n"
    assert os.stat(m.path / "a.md").st_mtime == 1_500_000_000  # still, after the upload


def test_cp_r_and_mv_into_the_mount(mount, tmp_path):
    make_tree(tmp_path / "src", {"d/x.md": "x", "d/sub/y.md": "y"})
    run("cp", "-r", str(tmp_path / "src" / "d"), str(mount.path))
    make_tree(tmp_path / "other", {"z.md": "z"})
    run("mv", str(tmp_path / "other" / "z.md"), str(mount.path / "d" / "z.md"))  # across devices
    assert not (tmp_path / "other" / "z.md").exists()
    mount.settle()
    wait_for(lambda: mount.paths() == {"/d/x.md", "/d/sub/y.md", "/d/z.md"}, timeout=5)
    assert mount.content("/d/sub/y.md") == "y"


def test_rsync_a_twice_second_run_uploads_nothing(mount, tmp_path):
    src = tmp_path / "src"
    make_tree(src, {"a.md": "alpha\n", "notes/b.md": "beta\n", "notes/deep/c.md": "gamma\n"})
    first = run("rsync", "-a", "-i", f"{src}/", f"{mount.path}/")
    assert first.count(">f") == 3
    mount.settle()
    wait_for(lambda: len(mount.paths()) == 3, timeout=5)
    assert mount.paths() == {"/a.md", "/notes/b.md", "/notes/deep/c.md"}
    assert len(mount.versions()) == 3  # rsync's .a.md.XXXXXX temp files never became memories
    for rel in ("a.md", "notes/b.md"):
        assert os.stat(mount.path / rel).st_mtime == os.stat(src / rel).st_mtime
    second = run("rsync", "-a", "-i", f"{src}/", f"{mount.path}/")
    assert ">f" not in second, second  # sizes and times match: nothing is copied again
    mount.settle()
    assert len(mount.versions()) == 3
    # a changed source file: exactly that one is copied, as one new version of the same memory
    memory_id = mount.memories()["/notes/b.md"].id
    (src / "notes" / "b.md").write_text("beta, changed\n")
    third = run("rsync", "-a", "-i", f"{src}/", f"{mount.path}/")
    assert third.count(">f") == 1
    mount.settle()
    assert mount.memories()["/notes/b.md"].id == memory_id
    assert operations(mount, memory_id) == ["modified", "created"]
    assert mount.paths() == {"/a.md", "/notes/b.md", "/notes/deep/c.md"}


def make_tar(path: Path, root: Path, files: dict[str, str]) -> None:
    make_tree(root, files)
    with tarfile.open(path, "w") as tar:
        for rel in files:
            tar.add(root / rel, arcname=rel)


def test_tar_x_new_then_over_existing(mount, tmp_path):
    make_tar(tmp_path / "v1.tar", tmp_path / "v1", {"t/a.md": "a1\n", "t/b.md": "b1\n"})
    make_tar(tmp_path / "v2.tar", tmp_path / "v2", {"t/a.md": "a2\n", "t/b.md": "b1\n"})
    run("tar", "-xf", str(tmp_path / "v1.tar"), "-C", str(mount.path))
    mount.settle()
    wait_for(lambda: mount.paths() == {"/t/a.md", "/t/b.md"}, timeout=5)
    ids = {p: mem.id for p, mem in mount.memories().items()}
    run("tar", "-xf", str(tmp_path / "v2.tar"), "-C", str(mount.path))  # unlink, then create
    assert (mount.path / "t" / "a.md").read_text() == "a2\n"
    mount.settle()
    assert {p: mem.id for p, mem in mount.memories().items()} == ids
    assert operations(mount, ids["/t/a.md"]) == ["modified", "created"]
    assert operations(mount, ids["/t/b.md"]) == ["created"]  # unchanged content: nothing
    assert mount.content("/t/a.md") == "a2\n"
    # and tar c reads the tree back
    out = subprocess.run(
        ["tar", "-cf", "-", "-C", str(mount.path), "t"], capture_output=True, check=True
    ).stdout
    assert b"a2\n" in out and b"b1\n" in out


def test_git_init_add_commit_zero_memories_from_git(mount):
    p = mount.path
    (p / "doc.md").write_text("doc v1\n")
    os.mkdir(p / "src")
    (p / "src" / "code.md").write_text("code\n")
    run("git", "init", "-q", str(p), env=GIT_ENV)
    run("git", "-C", str(p), "add", "-A", env=GIT_ENV)
    run("git", "-C", str(p), "commit", "-q", "-m", "first", env=GIT_ENV)
    (p / "doc.md").write_text("doc v2\n")
    run("git", "-C", str(p), "commit", "-q", "-am", "second", env=GIT_ENV)
    log = run("git", "-C", str(p), "log", "--oneline", env=GIT_ENV)
    assert len(log.splitlines()) == 2
    assert run("git", "-C", str(p), "status", "--porcelain", env=GIT_ENV) == ""
    assert run("git", "-C", str(p), "show", "HEAD~1:doc.md", env=GIT_ENV) == "doc v1\n"
    mount.settle()
    wait_for(lambda: mount.paths() == {"/doc.md", "/src/code.md"}, timeout=5)
    assert not any(path.startswith("/.git") for path in mount.paths())
    assert mount.content("/doc.md") == "doc v2\n"
    assert ".git" in os.listdir(p)  # listed and usable here, never uploaded
    assert mount.umount().returncode == 0
    assert mount.mount().returncode == 0
    assert sorted(os.listdir(p)) == ["doc.md", "src"]  # gone at unmount


def test_cold_grep_r_is_read_ahead_in_bulk(mount_factory):
    memories = {
        f"/t{d:02}/n{n:02}.md": f"note {d} {n}\n" + ("needle\n" if n == 3 else "")
        for d in range(10)
        for n in range(30)
    }
    m = mount_factory(memories=memories)
    assert len(run("grep", "-rl", "needle", str(m.path)).splitlines()) == 10

    # the root and t00 listed, then 2 view=full pages (20 + 10) per directory; the walk lists
    # nothing itself; statfs (grep asks for the filesystem type) counts the store: 3 pages
    listings = 2 + 10 * 2 + 3

    def status() -> dict | None:
        result = memfs("status", str(m.path), "--json", env=m.env)
        doc = json.loads(result.stdout)
        done = doc["requests"]["by_route"].get("GET /v1/memory_stores/{store}/memories", 0)
        return doc if done >= listings else None

    doc = wait_for(status, timeout=5)  # the status file is written every second
    routes = doc["requests"]["by_route"]
    assert routes["GET /v1/memory_stores/{store}/memories"] == listings
    assert routes.get("GET /v1/memory_stores/{store}/memories/{memory}", 0) == 0
    assert doc["cache"]["walk_prefetches"] == 9
    text = memfs("status", str(m.path), env=m.env).stdout
    assert "(9 ahead of a walk, " in text
    assert "cache budget " in text  # what the caches hold together (--cache-size)


def test_grep_r_and_find(mount_factory):
    m = mount_factory(
        memories={
            "/a.md": "needle one\n",
            "/d/b.md": "hay\n",
            "/d/e/c.md": "more\nneedle two\n",
            "/x/y/z/deep.md": "nothing\n",
        }
    )
    (m.path / "d" / "local.md~").write_text("needle local\n")
    grep = run("grep", "-rn", "needle", str(m.path))
    found = sorted(line[len(str(m.path)) :] for line in grep.splitlines())
    assert found == ["/a.md:1:needle one", "/d/e/c.md:2:needle two", "/d/local.md~:1:needle local"]
    files = run("find", str(m.path), "-type", "f", "-name", "*.md")
    assert sorted(line[len(str(m.path)) :] for line in files.splitlines()) == [
        "/a.md",
        "/d/b.md",
        "/d/e/c.md",
        "/x/y/z/deep.md",
    ]
    dirs = run("find", str(m.path), "-mindepth", "1", "-type", "d")
    assert sorted(line[len(str(m.path)) :] for line in dirs.splitlines()) == [
        "/d",
        "/d/e",
        "/x",
        "/x/y",
        "/x/y/z",
    ]
    sizes = run("find", str(m.path), "-name", "c.md", "-printf", "%s %m\n")
    assert sizes == "16 644\n"
    du = run("du", "-s", "--apparent-size", "-b", str(m.path))
    assert int(du.split()[0]) >= sum(
        len(c) for c in ("needle one\n", "hay\n", "more\nneedle two\n", "nothing\n")
    )


def test_shell_redirections_touch(mount_factory):
    m = mount_factory(memories={"/log.md": "one\n"})
    memory_id = m.memories()["/log.md"].id
    run("bash", "-c", f"echo two >> {m.path}/log.md && echo fresh > {m.path}/new.md")
    run("touch", str(m.path / "empty.md"))
    run("touch", str(m.path / "log.md"))  # times only: nothing uploaded
    m.settle()
    wait_for(lambda: m.paths() == {"/log.md", "/new.md", "/empty.md"}, timeout=5)
    assert m.content("/log.md") == "one\ntwo\n"
    assert m.content("/empty.md") == ""
    assert operations(m, memory_id) == ["modified", "created"]
    run("bash", "-c", f"echo replaced > {m.path}/log.md")  # O_TRUNC then write: one version
    m.settle()
    assert m.content("/log.md") == "replaced\n"
    assert operations(m, memory_id) == ["modified", "modified", "created"]
