"""Editors saving through a real mount: one memory, its id kept, exactly one new version per save.

nano runs for real in a tmux session (driven with send-keys, waited on with capture-pane), Emacs
in batch mode, vim non-interactively; the VS Code, JetBrains and GLib (gio) save sequences are
replayed syscall by syscall as ``docs/editors.md`` describes them. Each test also counts
the write requests the daemon sent (its ``--debug`` log lists every HTTP exchange): a save costs
one ``update`` and no scratch file ever reaches the store.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from kit.editors import vim_append_line
from kit.mounts import MountedStore
from kit.waiting import wait_for

ORIGINAL = "line one\n"
SAVED = "line one\nline two\n"
# the client's DEBUG line for each exchange: "GET /v1/memory_stores/{store}/memories -> 200 ..."
REQUEST = re.compile(r"memfs\.api\.transport: (GET|POST|PATCH|PUT|DELETE) (\S+) -> ")


def write_requests(m: MountedStore) -> list[str]:
    """The mutating requests the daemon sent so far, as ``METHOD route``."""
    return [f"{method} {route}" for method, route in REQUEST.findall(m.log()) if method != "GET"]


@pytest.fixture
def doc(mount_factory) -> MountedStore:
    """A mount (with the request log on) of a store holding ``/notes.md``."""
    return mount_factory("--debug", memories={"/notes.md": ORIGINAL})


def assert_one_save(m: MountedStore, memory_id: str, *, fsynced_temp: bool = False) -> None:
    """The store holds ``/notes.md`` only, same id, exactly one new version, one update sent.

    A temp file that was fsynced had to reach the server (fsync's promise): it was created,
    and deleted after the rename, as a memory of its own (two more writes, two more versions).
    """
    m.settle()
    wait_for(lambda: m.paths() == {"/notes.md"}, timeout=6)  # deferred scratch work is done
    assert m.memories()["/notes.md"].id == memory_id
    assert m.content("/notes.md") == SAVED
    assert [v.operation for v in m.versions(memory_id)] == ["modified", "created"]
    sent = write_requests(m)
    update = "POST /v1/memory_stores/{store}/memories/{memory}"
    if fsynced_temp:
        assert sorted(sent) == sorted(
            [update, "POST /v1/memory_stores/{store}/memories", "DELETE " + update[5:]]
        ), sent
        assert len(m.versions()) == 4
    else:
        assert sent == [update]
        assert len(m.versions()) == 2  # nothing else was ever created in the store


# -- real editors -------------------------------------------------------------------------------


class Tmux:
    """A private tmux server running one program in a 100x30 pane."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.socket = f"memfs-test-{uuid.uuid4().hex[:8]}"
        self.run("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", *command, env=env)

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
        )
        return result.stdout if result.returncode == 0 else ""

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "t", *keys)

    def wait_screen(self, text: str, timeout: float = 10.0) -> None:
        wait_for(lambda: text in self.screen(), timeout=timeout)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", "t"]).returncode == 0

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def tmux_factory() -> Iterator[type[Tmux]]:
    started: list[Tmux] = []

    class Tracked(Tmux):
        def __init__(self, command: list[str], env: dict[str, str]) -> None:
            super().__init__(command, env)
            started.append(self)

    try:
        yield Tracked
    finally:
        for session in started:
            session.kill()


@pytest.mark.skipif(shutil.which("tmux") is None or shutil.which("nano") is None, reason="no nano")
def test_nano_in_tmux(doc, tmux_factory, tmp_path):
    memory_id = doc.memories()["/notes.md"].id
    env = dict(os.environ, HOME=str(tmp_path), TERM="xterm")
    nano = tmux_factory(["nano", str(doc.path / "notes.md")], env)
    nano.wait_screen("line one")
    assert ".notes.md.swp" in os.listdir(doc.path)  # Debian's `set locking`: local-only
    nano.keys("M-/")  # to the last line (empty, after "line one\n")
    nano.keys("-l", "line two")  # nano ends the file with a newline itself
    nano.keys("C-o")
    nano.wait_screen("File Name to Write")
    nano.keys("Enter")
    nano.wait_screen("Wrote")
    nano.keys("C-x")
    wait_for(lambda: not nano.alive(), timeout=10)
    assert (doc.path / "notes.md").read_text() == SAVED
    assert os.listdir(doc.path) == ["notes.md"]  # the lock is gone
    assert_one_save(doc, memory_id)


# Emacs makes no backups of files below temporary-file-directory (the test's /tmp mount): allow
# them, so that the save renames the original to notes.md~ and writes a new file
# (docs/editors.md §1)
BACKUPS_EVEN_IN_TMP = "(setq backup-enable-predicate (lambda (_name) t))"


@pytest.mark.skipif(shutil.which("emacs") is None, reason="emacs not installed")
def test_emacs_batch(doc, tmp_path):
    memory_id = doc.memories()["/notes.md"].id
    lisp = '(progn (goto-char (point-max)) (insert "line two\\n") (save-buffer))'
    subprocess.run(
        [
            *("emacs", "--batch", "-Q", "--eval", BACKUPS_EVEN_IN_TMP),
            *(str(doc.path / "notes.md"), "--eval", lisp),
        ],
        check=True,
        timeout=30,
        capture_output=True,
        env=dict(os.environ, HOME=str(tmp_path)),
    )
    assert (doc.path / "notes.md").read_text() == SAVED
    # Emacs renamed the original to its backup and wrote a new file: the backup stays local
    assert sorted(os.listdir(doc.path)) == ["notes.md", "notes.md~"]
    assert (doc.path / "notes.md~").read_text() == ORIGINAL
    assert_one_save(doc, memory_id)


def test_vim_defaults(doc, tmp_path):
    """vim with its defaults.vim (swap file on, backup while writing)."""
    memory_id = doc.memories()["/notes.md"].id
    vim_append_line(doc.path / "notes.md", "line two", home=tmp_path)
    assert (doc.path / "notes.md").read_text() == SAVED
    assert_one_save(doc, memory_id)


@pytest.mark.skipif(shutil.which("gio") is None, reason="gio (libglib2.0-bin) not installed")
def test_gio_save(doc):
    """GLib's g_file_replace: .goutputstream-XXXXXX, then rename over the target."""
    memory_id = doc.memories()["/notes.md"].id
    subprocess.run(
        ["gio", "save", str(doc.path / "notes.md")],
        input=SAVED.encode(),
        check=True,
        timeout=20,
    )
    assert (doc.path / "notes.md").read_text() == SAVED
    assert_one_save(doc, memory_id, fsynced_temp=True)  # GLib fsyncs the temp file


# -- save sequences replayed syscall by syscall (docs/editors.md §1) ---------------------------


@pytest.mark.parametrize("fsync", [False, True])
def test_vscode_write_temp_then_rename(doc, fsync):
    memory_id = doc.memories()["/notes.md"].id
    target = doc.path / "notes.md"
    temp = doc.path / ".notes.md.vsctmp-8f3a"
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, SAVED.encode())
    if fsync:
        os.fsync(fd)
    os.close(fd)
    os.chmod(temp, os.stat(target).st_mode & 0o777)
    os.rename(temp, target)
    assert target.read_text() == SAVED
    assert os.listdir(doc.path) == ["notes.md"]
    assert_one_save(doc, memory_id, fsynced_temp=fsync)


def test_vscode_in_place(doc):
    memory_id = doc.memories()["/notes.md"].id
    fd = os.open(doc.path / "notes.md", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, SAVED.encode())
    os.close(fd)
    assert_one_save(doc, memory_id)


def test_jetbrains_safe_write(doc):
    memory_id = doc.memories()["/notes.md"].id
    p = doc.path
    (p / "notes.md___jb_tmp___").write_text(SAVED)
    os.rename(p / "notes.md", p / "notes.md___jb_old___")
    os.rename(p / "notes.md___jb_tmp___", p / "notes.md")
    os.unlink(p / "notes.md___jb_old___")
    assert os.listdir(p) == ["notes.md"]
    assert_one_save(doc, memory_id)


def test_save_in_a_subdirectory_twice(mount_factory):
    """Two saves far enough apart are two versions; the id never changes."""
    m = mount_factory(memories={"/d/notes.md": ORIGINAL})
    memory_id = m.memories()["/d/notes.md"].id
    for n, content in enumerate(("second\n", "third\n"), start=2):
        subprocess.run(
            ["sed", "-i", f"1s/.*/{content.strip()}/", str(m.path / "d" / "notes.md")], check=True
        )
        m.settle()
        assert len(m.versions(memory_id)) == n
    wait_for(lambda: m.paths() == {"/d/notes.md"}, timeout=6)
    assert m.memories()["/d/notes.md"].id == memory_id
    assert m.content("/d/notes.md") == "third\n"
