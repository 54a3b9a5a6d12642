"""``memfs status`` of a real mount, and reads while the server is away."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

import pytest

from kit.mounts import MountedStore, memfs
from kit.waiting import wait_for

pytestmark = pytest.mark.fuse


def test_status_reports_requests_cache_uploads_and_feed(
    faulty_mount: Callable[..., MountedStore],
) -> None:
    mounted = faulty_mount(memories={"/a.md": "alpha\n"})
    assert (mounted.path / "a.md").read_text() == "alpha\n"
    (mounted.path / "b.md").write_text("beta\n")
    mounted.settle()
    doc = wait_for(lambda: (d := mounted.status())["change_feed"]["polls"] > 0 and d, timeout=10)
    assert doc["store_id"] == mounted.store_id
    assert doc["requests"]["by_route"]["POST /v1/memory_stores/{store}/memories"] == 1
    assert doc["cache"]["content_bytes"] > 0
    assert doc["uploads"]["pending"] == 0 and doc["uploads"]["journal_records"] == 0
    assert doc["conflicts"]["count"] == 0
    assert doc["change_feed"]["source"] in ("poll", "stream")
    text = memfs("status", str(mounted.path), env=mounted.env)
    assert text.returncode == 0 and "change feed" in text.stdout and "conflicts" in text.stdout
    missing = memfs("status", str(mounted.path.parent), env=mounted.env)
    assert missing.returncode == 1 and "no memfs mount" in missing.stderr


def test_reads_from_cache_during_outage_and_eio_only_for_uncached(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore]
) -> None:
    mounted = faulty_mount(memories={"/warm.md": "warm\n", "/cold.md": "cold\n"})
    assert (mounted.path / "warm.md").read_text() == "warm\n"
    faulty_server.set_faults("outage=1")
    assert (mounted.path / "warm.md").read_text() == "warm\n"
    assert sorted(p.name for p in mounted.path.iterdir()) == ["cold.md", "warm.md"]
    with pytest.raises(OSError) as caught:
        (mounted.path / "cold.md").read_text()
    assert caught.value.errno == errno.EIO
    (mounted.path / "new.md").write_text("written during the outage\n")
    # status names what waits, and what is being retried, by path
    doc = wait_for(lambda: "/new.md" in (d := mounted.status())["uploads"]["retrying"] and d)
    assert doc["uploads"]["waiting"] == ["/new.md"]
    text = memfs("status", str(mounted.path), env=mounted.env).stdout
    assert "waiting: /new.md" in text and "retrying: /new.md: " in text
    faulty_server.set_faults("none")
    mounted.settle()
    assert mounted.content("/new.md") == "written during the outage\n"
    assert (mounted.path / "cold.md").read_text() == "cold\n"


def test_status_names_the_mount_and_the_feed_health_in_words(
    faulty_server: Any, faulty_mount: Callable[..., MountedStore]
) -> None:
    mounted = faulty_mount(memories={"/a.md": "alpha\n"})
    doc = wait_for(lambda: (d := mounted.status())["change_feed"]["state"] == "connected" and d)
    assert doc["mountpoint"] == str(mounted.path)
    assert (doc["store_id"], doc["store_name"]) == (mounted.store_id, mounted.store_name)
    assert doc["log_file"] == str(mounted.log_file)
    assert doc["change_feed"]["health"] == "connected (the server's change stream)"
    # idle and healthy: the feed is not behind, however long nothing changes
    first = doc["time"]
    later = wait_for(lambda: (d := mounted.status())["time"] > first and d, timeout=5)
    later = wait_for(lambda: (d := mounted.status())["time"] > later["time"] and d, timeout=5)
    assert later["change_feed"]["lag_seconds"] == 0
    text = memfs("status", str(mounted.path), env=mounted.env).stdout
    assert f"mountpoint       {mounted.path}\n" in text
    assert f"store            {mounted.store_name} ({mounted.store_id})" in text
    assert f"log file         {mounted.log_file}\n" in text
    assert "change feed      connected (the server's change stream); lag 0.0 s" in text

    faulty_server.stop()
    try:  # the stream is closed by the server's shutdown, then cannot reconnect
        down = wait_for(
            lambda: "unreachable" in (d := mounted.status())["change_feed"]["health"] and d
        )
        assert down["change_feed"]["state"] == "reconnecting"
        assert down["change_feed"]["health"].startswith("reconnecting since 20")
        assert down["change_feed"]["health"].endswith(" (the server is unreachable)")
        text = memfs("status", str(mounted.path), env=mounted.env).stdout
        assert "change feed      reconnecting since " in text and "stream, lag" not in text
        assert " 0 errors" not in text and down["change_feed"]["errors"] >= 1
    finally:
        faulty_server.start()  # teardown needs it
    wait_for(lambda: mounted.status()["change_feed"]["state"] == "connected", timeout=30)


def test_status_of_a_polling_mount_says_how_often(
    faulty_mount: Callable[..., MountedStore],
) -> None:
    mounted = faulty_mount("--change-feed", "poll")
    os.listdir(mounted.path)  # in use: the feed wakes and polls every second
    doc = wait_for(lambda: (d := mounted.status())["change_feed"]["polls"] > 0 and d)
    assert doc["change_feed"]["state"] == "polling"
    assert doc["change_feed"]["health"] == "polling every 1 s (in use)"
