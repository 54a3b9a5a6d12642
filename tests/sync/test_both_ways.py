"""``memfs sync``: the first copy, remote changes into DIR, local changes to the store, with
memory ids kept where a mount keeps them (a real server, a real detached ``memfs sync``)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from kit.mounts import memfs
from kit.synced import SyncedDir
from kit.waiting import wait_for

Factory = Callable[..., SyncedDir]


def test_first_copy_holds_every_memory(sync_factory: Factory) -> None:
    memories = {f"/d{i % 3}/sub/m{i}.md": f"memory {i}\n" for i in range(30)}
    memories["/top.md"] = "top\n"
    synced = sync_factory(memories=memories)
    for path, content in memories.items():
        assert synced.local(path).read_text() == content
    files = {"/" + str(p.relative_to(synced.path)) for p in synced.path.rglob("*") if p.is_file()}
    assert files == set(memories) | {"/.memfs/sync-id"}  # the sync's marker: never uploaded
    assert stat.S_IMODE(synced.local("/top.md").stat().st_mode) == 0o644


def test_remote_changes_appear(sync_factory: Factory) -> None:
    synced = sync_factory(memories={"/a.md": "one\n", "/dir/b.md": "bee\n", "/gone.md": "x\n"})
    synced.put("/new/deep.md", "created remotely\n")
    synced.wait_local("/new/deep.md", "created remotely\n")
    synced.put("/a.md", "two\n")
    synced.wait_local("/a.md", "two\n")
    memory = synced.memories()["/dir/b.md"]
    synced.sdk.beta.memory_stores.memories.update(
        memory.id, memory_store_id=synced.store_id, path="/moved/b.md"
    )
    synced.wait_local("/moved/b.md", "bee\n")
    synced.wait_local("/dir/b.md", None)
    gone = synced.memories()["/gone.md"]
    synced.sdk.beta.memory_stores.memories.delete(gone.id, memory_store_id=synced.store_id)
    synced.wait_local("/gone.md", None)
    assert not synced.local("/dir").exists()  # emptied by the move: gone as on a mount


def test_local_changes_reach_the_store_keeping_ids(sync_factory: Factory) -> None:
    synced = sync_factory(memories={"/a.md": "one\n", "/b.md": "bee\n", "/c.md": "sea\n"})
    ids = {path: m.id for path, m in synced.memories().items()}
    (synced.path / "notes").mkdir()
    synced.local("/notes/new.md").write_text("made here\n")
    synced.wait_content("/notes/new.md", "made here\n")
    synced.local("/a.md").write_text("one, edited\n")
    synced.wait_content("/a.md", "one, edited\n")
    with synced.local("/a.md").open("a") as appended:
        appended.write("and appended\n")
    synced.wait_content("/a.md", "one, edited\nand appended\n")
    synced.local("/b.md").rename(synced.local("/renamed.md"))
    wait_for(lambda: "/renamed.md" in synced.paths() and "/b.md" not in synced.paths())
    synced.local("/c.md").unlink()
    wait_for(lambda: "/c.md" not in synced.paths())
    memories = synced.memories()
    assert memories["/a.md"].id == ids["/a.md"]  # an update, not a new memory
    assert memories["/renamed.md"].id == ids["/b.md"]  # a rename keeps the memory


def test_an_editors_safe_save_is_one_update_of_the_same_memory(sync_factory: Factory) -> None:
    synced = sync_factory(memories={"/doc.md": "draft\n"})
    memory_id = synced.memories()["/doc.md"].id
    # vim's way with backupcopy=no: the file renamed to its backup, the new text written
    # beside it under a swap name and renamed in, the backup removed
    doc = synced.local("/doc.md")
    swap = synced.local("/.doc.md.swp")
    swap.write_text("swap\n")
    doc.rename(synced.local("/doc.md~"))
    temp = synced.local("/.doc.md.tmp123")
    temp.write_text("final text\n")
    temp.rename(doc)
    synced.local("/doc.md~").unlink()
    swap.unlink()
    synced.wait_content("/doc.md", "final text\n")
    synced.pass_marker()
    memories = synced.memories()
    assert memories["/doc.md"].id == memory_id
    assert set(memories) == {"/doc.md", "/marker.md"}  # no backup, swap or temporary uploaded


def test_local_only_names_are_never_uploaded(sync_factory: Factory) -> None:
    synced = sync_factory()
    for name in (".DS_Store", "Thumbs.db", "desktop.ini", "._notes.md", ".notes.md.swp"):
        synced.local(name).write_text("local\n")
    (synced.path / ".git").mkdir()
    synced.local("/.git/config").write_text("[core]\n")
    synced.pass_marker()
    assert synced.paths() == {"/marker.md"}


def test_polling_sees_local_changes_too(sync_factory: Factory) -> None:
    synced = sync_factory("--watch", "poll", "--change-feed", "poll")
    synced.local("/polled.md").write_text("seen by polling\n")
    synced.wait_content("/polled.md", "seen by polling\n")
    synced.put("/remote.md", "polled in\n")
    synced.wait_local("/remote.md", "polled in\n")


def test_once_reconciles_both_ways_and_exits(sync_factory: Factory) -> None:
    synced = sync_factory(start=False, memories={"/remote.md": "from the store\n"})
    synced.path.mkdir()
    synced.local("/local.md").write_text("from here\n")
    result = synced.once()
    assert result.returncode == 0, result.stderr + synced.log()
    assert synced.local("/remote.md").read_text() == "from the store\n"
    assert synced.content("/local.md") == "from here\n"
    # a second run starts from the basis: nothing changed, nothing moves
    again = synced.once()
    assert again.returncode == 0, again.stderr
    assert os.listdir(synced.path) != []
    assert synced.paths() == {"/remote.md", "/local.md"}


def test_status_lists_the_sync_and_reports_on_a_path_inside_it(sync_factory: Factory) -> None:
    synced = sync_factory(memories={"/notes/a.md": "alpha\n"})
    listed = memfs("status", env=synced.env)
    assert listed.returncode == 0, listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if f" {synced.path} " in line]
    assert line.startswith("sync ") and synced.store_id in line
    inside = memfs("status", str(synced.local("/notes/a.md")), env=synced.env)
    assert inside.returncode == 0 and f"synced dir       {synced.path}" in inside.stdout
