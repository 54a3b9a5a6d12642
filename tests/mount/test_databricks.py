"""Databricks stores mounted for real: ``memfs mount STORE MNT --api databricks --actor A``
against the reference server's Databricks routes (``/api/2.0/agents/memory-stores``), the
workspace found from ``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN`` as Databricks users set them.

Each entry of the actor is a file (only its session-less ones, or only one session's with
``--session``), its description the ``user.description`` attribute; saves update the same entry,
a rename is a create and a delete, a change made through the API meanwhile is a conflict (never
silent), a read-only mount refuses every change, ``.versions`` does not exist.
"""

from __future__ import annotations

import errno
import http.server
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from databricks.sdk import WorkspaceClient
from databricks.sdk.common.types.fieldmask import FieldMask
from databricks.sdk.service.agentkit import ManagedMemoryEntry

from kit.databricks import ACTOR, Workspace, databricks_env
from kit.editors import vim_append_line
from kit.mounts import MountedStore, memfs
from kit.servers import ServerProcess
from kit.waiting import wait_for
from memfs.contract.databricks_limits import MAX_CONTENT_BYTES
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.databricks.storage import SOURCE_AGENT, NewEntry


@pytest.fixture
def workspace(server: ServerProcess) -> Iterator[Workspace]:
    space = Workspace(server)
    try:
        yield space
    finally:
        space.http.close()


@pytest.fixture
def dbx_mount(
    server: ServerProcess, tmp_path: Path, sdk: Any
) -> Iterator[Callable[..., MountedStore]]:
    env = databricks_env(server, tmp_path)
    made: list[MountedStore] = []

    def mount(store: str, *args: str) -> MountedStore:
        point = tmp_path / f"dbx{len(made)}"
        point.mkdir()
        mounted = MountedStore(
            path=point,
            store_id=store,
            store_name=store,
            sdk=sdk,
            env=env,
            log_file=tmp_path / f"dbx{len(made)}.log",
            extra_args=["--api", "databricks", "--actor", ACTOR, *args],
        )
        made.append(mounted)
        result = mounted.mount()
        assert result.returncode == 0, f"mount failed: {result.stderr}\n{mounted.log()}"
        return mounted

    try:
        yield mount
    finally:
        for mounted in made:
            mounted.cleanup()
        for mounted in made:
            assert "Traceback" not in mounted.log(), mounted.log()
            assert server.api_key not in mounted.log()  # the token never in a log


def test_mount_errors_are_one_line(
    server: ServerProcess, workspace: Workspace, tmp_path: Path
) -> None:
    store = workspace.create_store()
    point = tmp_path / "mnt"
    point.mkdir()
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "ANTHROPIC_BASE_URL"):
        env.pop(name, None)

    def mount(*args: str, **extra: str) -> tuple[int, str]:
        done = memfs("mount", *args, env={**env, **extra}, timeout=60)
        return done.returncode, done.stderr

    code, said = mount(store, str(point), "--api", "databricks")
    assert (code, said) == (
        2,
        "memfs mount: --api databricks needs --actor ACTOR (whose entries to mount)\n",
    )
    code, said = mount(store, str(point), "--api", "databricks", "--actor", ACTOR, "--session", "")
    assert code == 2 and said.startswith("memfs mount: --session needs a session id")
    code, said = mount(store, str(point), "--actor", ACTOR)
    assert (code, said) == (2, "memfs mount: --actor needs --api databricks\n")
    dbx = ("--api", "databricks", "--actor", ACTOR)
    code, said = mount(store, str(point), *dbx)
    assert (
        code == 2
        and said.startswith("memfs mount: no Databricks workspace")
        and said.count("\n") == 1
    )
    host = {"DATABRICKS_HOST": server.base_url}
    code, said = mount(store, str(point), *dbx, **host, DATABRICKS_TOKEN="not-the-token")
    assert (code, said) == (
        5,
        "memfs mount: the Databricks token in DATABRICKS_TOKEN was refused by "
        f"{server.base_url} (401 UNAUTHENTICATED)\n",
    )
    code, said = mount("no-such-store", str(point), *dbx, **host, DATABRICKS_TOKEN=workspace.token)
    assert (code, said) == (3, "memfs mount: memory store 'no-such-store' not found\n")
    assert not os.path.ismount(point)

    # a profile of ~/.databrickscfg, as the Databricks CLI writes it
    config = tmp_path / ".databrickscfg"
    config.write_text(f"[work]\nhost = {server.base_url}\ntoken = {workspace.token}\n")
    config.chmod(0o600)
    workspace.put(store, "/from-profile.md", "found\n")
    code, said = mount(store, str(point), *dbx, "--profile", "work")
    try:
        assert (code, said) == (0, "")
        assert os.listdir(point) == ["from-profile.md"]
    finally:
        assert memfs("umount", str(point), env=env).returncode == 0


class MetadataService:
    """A Databricks metadata service handing out OAuth tokens, as on Databricks compute: the
    SDK's ``metadata-service`` credentials (here: the server's key, expired at once, so the
    SDK fetches it anew whenever memfs asks it for headers)."""

    def __init__(self, token: str) -> None:
        self.asked = 0
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                service.asked += 1
                body = json.dumps(
                    {
                        "access_token": token,
                        "token_type": "Bearer",
                        "expires_on": int(time.time()) + 1,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/token"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def test_a_workspace_with_oauth_credentials(
    server: ServerProcess, workspace: Workspace, tmp_path: Path
) -> None:
    """Credentials other than a personal access token (here the metadata service of Databricks
    compute): the SDK makes and refreshes the token, asked at each request."""
    store = workspace.create_store()
    workspace.put(store, "/oauth.md", "by token\n")
    service = MetadataService(workspace.token)
    point = tmp_path / "mnt"
    point.mkdir()
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("DATABRICKS_TOKEN", None)
    env.update(DATABRICKS_HOST=server.base_url, DATABRICKS_METADATA_SERVICE_URL=service.url)
    try:
        done = memfs("mount", store, str(point), "--api", "databricks", "--actor", ACTOR, env=env)
        assert (done.returncode, done.stderr) == (0, "")
        try:
            assert (point / "oauth.md").read_text() == "by token\n"
            (point / "new.md").write_text("sent with a refreshed header\n")
            fd = os.open(point, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            assert workspace.content(store, "/new.md") == "sent with a refreshed header\n"
            assert service.asked >= 3  # resolved at start, then asked for by requests
        finally:
            assert memfs("umount", str(point), env=env).returncode == 0
    finally:
        service.close()


def entry_id(entry: dict[str, Any]) -> str:
    return str(entry["name"]).rsplit("/", 1)[1]


def test_files_are_the_actors_entries_and_saves_keep_the_entry(
    dbx_mount: Callable[..., MountedStore], workspace: Workspace, tmp_path: Path
) -> None:
    store = workspace.create_store()
    notes = workspace.put(store, "/notes.md", "line one\n", description="what I noted")
    tone_before = workspace.put(store, "/prefs/tone.md", "be brief\n")
    workspace.put(store, "/s.md", "a session's\n", session="s1")
    workspace.put(store, "/other.md", "another actor's\n", actor="someone-else")
    mounted = dbx_mount(store)
    root = mounted.path
    assert mounted.pid is not None  # the token reached the daemon by its environment only
    assert workspace.token not in Path(f"/proc/{mounted.pid}/cmdline").read_text()
    assert sorted(os.listdir(root)) == ["notes.md", "prefs"]
    assert (root / "notes.md").read_text() == "line one\n"
    grep = subprocess.run(["grep", "-r", "brief", str(root)], capture_output=True, text=True)
    assert grep.stdout == f"{root}/prefs/tone.md:be brief\n"
    assert not (root / ".versions").exists()  # no versions on Databricks
    with pytest.raises(FileNotFoundError):
        os.listdir(root / ".versions")

    # extended attributes: the description
    assert os.getxattr(root / "notes.md", "user.description") == b"what I noted"
    assert os.listxattr(root / "notes.md") == ["user.description"]
    assert os.listxattr(root / "prefs" / "tone.md") == []
    shown = subprocess.run(
        ["getfattr", "-n", "user.description", "--only-values", str(root / "notes.md")],
        capture_output=True,
        text=True,
    )
    assert shown.stdout == "what I noted"
    subprocess.run(
        [
            "setfattr",
            "-n",
            "user.description",
            "-v",
            "the tone to use",
            str(root / "prefs/tone.md"),
        ],
        check=True,
    )
    with pytest.raises(OSError) as absent:
        os.getxattr(root / "prefs" / "tone.md", "user.other")
    assert absent.value.errno == errno.ENODATA

    # vim and sed -i save the same entry
    vim_append_line(root / "notes.md", "line two", home=tmp_path)
    subprocess.run(["sed", "-i", "s/brief/very brief/", str(root / "prefs/tone.md")], check=True)
    (root / "new.md").write_text("fresh\n")
    mounted.settle()
    entries = workspace.entries(store)
    assert entry_id(entries[(None, "/notes.md")]) == entry_id(notes)
    assert entries[(None, "/notes.md")]["content"] == "line one\nline two\n"
    assert entries[(None, "/notes.md")]["description"] == "what I noted"
    tone = entries[(None, "/prefs/tone.md")]
    assert entry_id(tone) == entry_id(tone_before)
    assert (tone["content"], tone["description"]) == ("be very brief\n", "the tone to use")
    assert entries[(None, "/new.md")]["content"] == "fresh\n"
    assert "session_id" not in entries[(None, "/new.md")]
    assert set(entries) == {
        (None, "/notes.md"),
        (None, "/prefs/tone.md"),
        (None, "/new.md"),
        ("s1", "/s.md"),
    }

    # rename: a create at the new path (description kept) and a delete; rm deletes
    os.rename(root / "notes.md", root / "kept.md")
    os.unlink(root / "new.md")
    mounted.settle()
    entries = workspace.entries(store)
    kept = entries[(None, "/kept.md")]
    assert (kept["content"], kept["description"]) == ("line one\nline two\n", "what I noted")
    assert (None, "/notes.md") not in entries and (None, "/new.md") not in entries
    assert sorted(os.listdir(root)) == ["kept.md", "prefs"]

    # a change made through the API meanwhile: a conflict copy, never a silent overwrite
    fd = os.open(root / "kept.md", os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"mine\n")
        workspace.patch(store, kept, "theirs\n")
        with pytest.raises(OSError) as stale:
            os.fsync(fd)
        assert stale.value.errno == errno.ESTALE
    finally:
        os.close(fd)
    mounted.settle()
    entries = workspace.entries(store)
    assert entries[(None, "/kept.md")]["content"] == "theirs\n"
    copies = [e for (s, p), e in entries.items() if p.startswith("/kept.conflict-")]
    assert [e["content"] for e in copies] == ["mine\n"]
    wait_for(lambda: (root / "kept.md").read_text() == "theirs\n")

    # changes made elsewhere appear (memfs server pushes them)
    workspace.put(store, "/remote.md", "from elsewhere\n")
    workspace.patch(store, tone, "changed elsewhere\n")
    wait_for(lambda: (root / "remote.md").exists())
    assert (root / "remote.md").read_text() == "from elsewhere\n"
    wait_for(lambda: (root / "prefs" / "tone.md").read_text() == "changed elsewhere\n")
    unmounted = mounted.umount()  # and the unmount report says so
    assert unmounted.returncode == 1 and "/kept.conflict-" in unmounted.stderr


def test_a_content_over_the_limit_is_efbig_and_the_entry_keeps_its_own(
    dbx_mount: Callable[..., MountedStore], workspace: Workspace
) -> None:
    """MAX_CONTENT_BYTES of the server's Databricks entries, as on Memory Stores
    (docs/semantics.md, "Refused files"): the crossing write and the close fail with EFBIG, the
    entry is never updated, and a truncate back to a size the store takes ends the refusal."""
    store = workspace.create_store()
    before = workspace.put(store, "/big.md", "small\n")
    mounted = dbx_mount(store)
    big = mounted.path / "big.md"
    fd = os.open(big, os.O_WRONLY | os.O_APPEND)
    try:
        with pytest.raises(OSError) as too_big:
            while True:  # the kernel may take the rest of a page first: a short write
                os.write(fd, b"x" * 20_000)
        assert too_big.value.errno == errno.EFBIG
        assert os.fstat(fd).st_size <= MAX_CONTENT_BYTES
    finally:
        with pytest.raises(OSError) as refused:
            os.close(fd)
    assert refused.value.errno == errno.EFBIG
    wait_for(lambda: mounted.status()["refused"]["files"] == ["/big.md"], timeout=10)
    mounted.settle()
    entry = workspace.entries(store)[(None, "/big.md")]
    assert (entry_id(entry), entry["content"]) == (entry_id(before), "small\n")
    with pytest.raises(OSError) as absurd:
        os.truncate(big, MAX_CONTENT_BYTES + 1)
    assert absurd.value.errno == errno.EFBIG
    os.truncate(big, len("small\n"))  # the content the store has: the refusal ends
    assert big.read_text() == "small\n"
    wait_for(lambda: mounted.status()["refused"]["files"] == [], timeout=10)
    unmounted = mounted.umount()
    assert (unmounted.returncode, unmounted.stderr) == (0, "")
    assert workspace.content(store, "/big.md") == "small\n"


def test_a_session_mount_and_a_read_only_mount(
    dbx_mount: Callable[..., MountedStore], workspace: Workspace
) -> None:
    store = workspace.create_store()
    workspace.put(store, "/shared.md", "no session\n")
    workspace.put(store, "/s.md", "session one\n", session="s1", description="d")
    workspace.put(store, "/t.md", "session two\n", session="s2")
    session = dbx_mount(store, "--session", "s1")
    assert os.listdir(session.path) == ["s.md"]
    status = session.status()  # memfs status names the store, the actor and the session
    assert (status["store_id"], status["store_name"]) == (
        store,
        f"{store} (actor {ACTOR}, session s1)",
    )
    # memfs server pushes changes (its Databricks change stream): no polling
    wait_for(lambda: session.status()["change_feed"].get("state") == "connected")
    (session.path / "made.md").write_text("in s1\n")
    session.settle()
    assert workspace.content(store, "/made.md", session="s1") == "in s1\n"
    assert workspace.content(store, "/made.md") is None

    # without the server's stream (as on a Databricks workspace) the mount polls the listing
    read_only = dbx_mount(store, "--read-only", "--change-feed", "poll")
    assert os.listdir(read_only.path) == ["shared.md"]
    assert read_only.status()["change_feed"]["state"] == "polling"
    workspace.put(store, "/polled.md", "found by polling\n")
    wait_for(lambda: sorted(os.listdir(read_only.path)) == ["polled.md", "shared.md"])
    for change in (
        lambda: (read_only.path / "shared.md").write_text("x"),
        lambda: (read_only.path / "new.md").write_text("x"),
        lambda: os.unlink(read_only.path / "shared.md"),
        lambda: os.rename(read_only.path / "shared.md", read_only.path / "x.md"),
        lambda: os.setxattr(read_only.path / "shared.md", "user.description", b"x"),
    ):
        with pytest.raises(OSError) as refused:
            change()
        assert refused.value.errno == errno.EROFS
    assert workspace.content(store, "/shared.md") == "no session\n"
    assert (read_only.path / "polled.md").read_text() == "found by polling\n"


def test_changes_made_elsewhere_are_pushed_by_memfs_server(
    server: ServerProcess, dbx_mount: Callable[..., MountedStore], workspace: Workspace
) -> None:
    """On memfs server a Databricks mount follows the server's change stream: with polls an
    hour apart, a change made through databricks-sdk still shows at once; another actor's or
    another session's entries never do."""
    store = workspace.create_store()
    mounted = dbx_mount(store, "--poll-interval", "3600", "--idle-poll-interval", "3600")
    root = mounted.path
    feed = mounted.status()["change_feed"]
    assert (feed["state"], feed["source"]) == ("connected", "stream")
    assert feed["health"] == "connected (the server's change stream)"
    assert os.listdir(root) == []
    sdk = WorkspaceClient(host=server.base_url, token=server.api_key)
    agent_kit = sdk.agent_kit
    name = f"memory-stores/{store}"
    agent_kit.create_memory(name, ManagedMemoryEntry(actor_id="other", path="/theirs.md"))
    agent_kit.create_memory(name, ManagedMemoryEntry(actor_id=ACTOR, path="/s.md", session_id="s"))
    pushed = agent_kit.create_memory(
        name, ManagedMemoryEntry(actor_id=ACTOR, path="/notes/pushed.md", content="pushed\n")
    )
    wait_for(lambda: os.listdir(root) == ["notes"])  # the later change arrived: not the others
    assert os.listdir(root / "notes") == ["pushed.md"]
    assert (root / "notes" / "pushed.md").read_text() == "pushed\n"
    agent_kit.update_memory(
        pushed.name,
        ManagedMemoryEntry(actor_id=ACTOR, path="/notes/pushed.md", content="changed\n"),
        FieldMask(["content"]),
    )
    wait_for(lambda: (root / "notes" / "pushed.md").read_text() == "changed\n")
    agent_kit.delete_memory(pushed.name)
    wait_for(lambda: not (root / "notes" / "pushed.md").exists())
    feed = mounted.status()["change_feed"]
    assert (feed["state"], feed["errors"], feed["resyncs"]) == ("connected", 0, 0)


def test_search_shows_the_mounts_entries_only(
    workspace: Workspace, dbx_mount: Callable[..., MountedStore]
) -> None:
    """``.search/`` of a Databricks mount: ``entries:search`` ranks; the actor's session-less
    entries only (or one session's), each with its description."""
    store = workspace.create_store()
    workspace.put(store, "/garden.md", "tomatoes need sun", description="vegetable notes")
    workspace.put(store, "/cooking.md", "pasta with tomato sauce")
    workspace.put(store, "/s1.md", "a tomato of the session", session="s1")
    workspace.put(store, "/other.md", "another actor's tomato", actor="agent-8")
    plain = dbx_mount(store)
    rows = [
        line.split("\t") for line in (plain.path / ".search" / "tomato").read_text().splitlines()
    ]
    assert sorted((row[0], row[2], row[3]) for row in rows) == [
        ("/cooking.md", "", "pasta with tomato sauce"),
        ("/garden.md", "vegetable notes", "tomatoes need sun"),
    ]
    (plain.path / "new.md").write_text("a tomato written just now\n")
    found = (plain.path / ".search" / "just now").read_text()
    assert found.split("\t")[0] == "/new.md"
    no_attribute = subprocess.run(  # a search has no description: ENODATA, as .versions
        ["getfattr", "-n", "user.description", str(plain.path / ".search" / "tomato")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert no_attribute.stderr.endswith("No such attribute\n"), no_attribute.stderr
    session = dbx_mount(store, "--session", "s1")
    assert [
        line.split("\t")[0]
        for line in (session.path / ".search" / "tomato").read_text().splitlines()
    ] == ["/s1.md"]


def test_memfs_search_databricks(
    server: ServerProcess, workspace: Workspace, tmp_path: Path
) -> None:
    """``memfs search STORE QUERY --api databricks --actor A [--session S] [--limit N]``: the
    actor's entries ranked by ``entries:search`` (no mount needed), at most N, best first."""
    store = workspace.create_store()
    workspace.put(store, "/garden.md", "tomatoes need sun", description="vegetable notes")
    workspace.put(store, "/s1.md", "a tomato of the session", session="s1")
    workspace.put(store, "/other.md", "another actor's tomato", actor="agent-8")
    env = dict(os.environ, HOME=str(tmp_path))
    env.update(DATABRICKS_HOST=server.base_url, DATABRICKS_TOKEN=server.api_key)
    dbx = ("--api", "databricks", "--actor", ACTOR)

    def search(*args: str) -> subprocess.CompletedProcess[str]:
        done = memfs("search", store, "tomato", *args, env=env, timeout=60)
        assert server.api_key not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        return done

    done = search(*dbx)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("/garden.md\t") and done.stdout.count("\n") == 1
    assert done.stdout.rstrip("\n").split("\t")[2:] == ["vegetable notes", "tomatoes need sun"]
    done = search(*dbx, "--session", "s1", "--json")
    assert [hit["path"] for hit in json.loads(done.stdout)] == ["/s1.md"]
    # --limit N: at most N, best first, counted among the mount's entries only (a better match
    # in a session or of another actor takes no place)
    ranked = workspace.create_store()
    for path, content in [
        ("/once.md", "a tomato and a cucumber"),
        ("/twice.md", "tomato, tomato"),
        ("/thrice.md", "tomato tomato tomato"),
        ("/none.md", "cucumber"),
    ]:
        workspace.put(ranked, path, content)
    workspace.put(ranked, "/s1.md", "tomato tomato tomato tomato", session="s1")
    workspace.put(ranked, "/b.md", "tomato tomato tomato tomato", actor="agent-8")
    done = memfs("search", ranked, "tomato", *dbx, "--limit", "2", "--json", env=env, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    hits = json.loads(done.stdout)
    assert [hit["path"] for hit in hits] == ["/thrice.md", "/twice.md"]
    assert hits[0]["score"] > hits[1]["score"] > 0
    done = search("--actor", ACTOR)
    assert (done.returncode, done.stderr) == (2, "memfs: --actor needs --api databricks\n")
    done = search("--api", "databricks")
    assert done.returncode == 2 and "needs --actor ACTOR" in done.stderr
    done = memfs("search", "no-such-store", "tomato", *dbx, env=env, timeout=60)
    assert done.returncode == 3 and done.stderr.count("\n") == 1


def test_a_nul_the_api_refuses_is_einval_at_close_and_setfattr_and_blocks_nothing(
    dbx_mount: Callable[..., MountedStore], workspace: Workspace
) -> None:
    """The API refuses NUL in a content or a description (``Capabilities.refused_characters``):
    the close (and fsync) of such a content, and the setfattr of such a description, fail with
    EINVAL and one log line; nothing is journaled or uploaded, ``memfs status`` counts them,
    and the file's later saves go as usual (docs/semantics.md, "Refused files")."""
    store = workspace.create_store()
    before = workspace.put(store, "/f.md", "one\n", description="kept")
    mounted = dbx_mount(store)
    f = mounted.path / "f.md"
    fd = os.open(f, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"a\0b")
        with pytest.raises(OSError) as at_fsync:
            os.fsync(fd)
        assert at_fsync.value.errno == errno.EINVAL
    finally:
        with pytest.raises(OSError) as at_close:
            os.close(fd)
    assert at_close.value.errno == errno.EINVAL
    new = mounted.path / "new.md"
    # printf 'x\0y' > new.md: the shell never asks
    with pytest.raises(OSError) as new_file, open(new, "wb") as out:
        out.write(b"x\0y")
    assert new_file.value.errno == errno.EINVAL
    assert f.read_bytes() == b"a\0b"  # kept locally, readable
    with pytest.raises(OSError) as described:
        os.setxattr(f, "user.description", b"x\0y")
    assert described.value.errno == errno.EINVAL
    assert os.getxattr(f, "user.description") == b"kept"  # unchanged
    status = wait_for(
        lambda: (s := mounted.status())["refused"]["files"] == ["/f.md", "/new.md"] and s,
        timeout=10,
    )
    assert status["uploads"]["journal_records"] == 0  # never journaled for replay
    assert status["refused"]["by_reason"]["refused character"] == 2
    assert status["refused"]["by_reason"]["description"] == 1
    text = memfs("status", str(mounted.path), env=mounted.env).stdout
    assert "a refused character 2, descriptions 1" in text
    mounted.settle()  # nothing failed: nothing was sent
    entry = workspace.entries(store)[(None, "/f.md")]
    assert (entry_id(entry), entry["content"], entry["description"]) == (
        entry_id(before),
        "one\n",
        "kept",
    )
    assert (None, "/new.md") not in workspace.entries(store)
    log = mounted.log()
    assert log.count("refused /f.md: holds a character the store refuses") == 1
    assert log.count("refused the description of /f.md") == 1

    # the next valid saves go, description included
    f.write_text("fixed\n")
    with pytest.raises(OSError) as extended:  # truncate(path) would add NULs: changes nothing
        os.truncate(f, 20)
    assert extended.value.errno == errno.EINVAL and f.read_text() == "fixed\n"
    os.setxattr(f, "user.description", b"new words")
    new.write_text("now valid\n")
    mounted.settle()
    entry = workspace.entries(store)[(None, "/f.md")]
    assert (entry["content"], entry["description"]) == ("fixed\n", "new words")
    assert workspace.content(store, "/new.md") == "now valid\n"
    wait_for(lambda: mounted.status()["refused"]["files"] == [], timeout=10)
    unmounted = mounted.umount()
    assert (unmounted.returncode, unmounted.stderr) == (0, "")


def store_as_an_older_server(server: ServerProcess, store: str, path: str, content: str) -> None:
    """An entry at ``path`` written straight into the server's database, as a server without
    today's path rules (or another implementation of the API) could have stored it."""

    async def insert() -> None:
        storage = await SqliteStorage.open(server.db)
        try:
            entry = NewEntry(None, ACTOR, None, path, content, None, SOURCE_AGENT)
            await storage.databricks.create_entry(store, entry)
        finally:
            await storage.aclose()

    trio.run(insert)


def test_entries_at_paths_outside_the_rules_are_saved_by_sed_and_vim(
    server: ServerProcess,
    dbx_mount: Callable[..., MountedStore],
    workspace: Workspace,
    tmp_path: Path,
) -> None:
    """The server refuses new paths outside the rules a mount can save (NFD, control
    characters, a segment over 255 bytes, more than 20 segments: tests/server/databricks), but
    an entry an older server stored at one is saved by the editors' rename-over saves: the
    rename target is the entry's path, so it is accepted; in a directory outside the rules a
    tool's temporary file stays local-only. A new name outside the rules is still refused."""
    store = workspace.create_store()
    odd = {
        "nfd": "/cafe\u0301.md",
        "control": "/a\x01b.md",
        "long": "/" + "x" * 297 + ".md",
        "deep": "/" + "/".join(str(i) for i in range(1, 21)) + "/21.md",
        "nfd directory": "/re\u0301sume\u0301/notes.md",
    }
    for path in odd.values():
        store_as_an_older_server(server, store, path, "one\n")
    ids = {path: entry_id(e) for (_, path), e in workspace.entries(store).items()}
    assert set(ids) == set(odd.values())
    mounted = dbx_mount(store)
    for path in odd.values():
        f = mounted.path / path.lstrip("/")
        with open(f, "a") as appended:  # worked before too: an update of the same entry
            appended.write("two\n")
        subprocess.run(["sed", "-i", "s/one/ONE/", str(f)], check=True)
        vim_append_line(f, "three", home=tmp_path)
        assert f.read_text() == "ONE\ntwo\nthree\n", path
    mounted.settle()
    entries = workspace.entries(store)
    for path in odd.values():
        entry = entries[(None, path)]
        assert (entry_id(entry), entry["content"]) == (ids[path], "ONE\ntwo\nthree\n"), path
    # a new name outside the rules is refused as before; in a directory outside them a new
    # file stays local-only (never uploaded: the server would refuse its path)
    for bad in ("e\u0301.md", "c\x02.md", "n" * 256):
        with pytest.raises(OSError) as refused:
            (mounted.path / bad).write_text("x")
        assert refused.value.errno in (errno.EINVAL, errno.ENAMETOOLONG)
    (mounted.path / "re\u0301sume\u0301" / "local.md").write_text("stays here\n")
    mounted.settle()
    assert set(workspace.entries(store)) == {(None, path) for path in odd.values()}
    assert (mounted.path / "re\u0301sume\u0301" / "local.md").read_text() == "stays here\n"
    unmounted = mounted.umount()
    assert (unmounted.returncode, unmounted.stderr) == (0, "")
