"""Another user of an ``--allow-other`` mount cannot grow the root daemon without bound: local-only
files, refused content and its kept copies, files waiting for room in a full store count against
``--local-bytes`` (memfs.core.model.budget); past it, creates and writes get ENOSPC; removing the
files (or room in the store) frees the budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kit.mounts import MountedStore, memfs
from kit.planted import NOBODY, as_nobody
from kit.waiting import wait_for

from .test_errnos import seed

BUDGET = 1024 * 1024
FILE = 100_000


def fill(target: str, byte: str) -> str:
    """Write ``FILE`` bytes of ``byte`` to target0, target1...: "stopped N: <error>" at the
    first ENOSPC (other errors, EILSEQ of a refused file, go on)."""
    return f"""
        i=0
        while [ $i -lt 40 ]; do
            err=$( {{ head -c {FILE} /dev/zero | tr '\\0' '{byte}' > {target}$i; }} 2>&1 )
            case $err in *"No space left"*) echo "stopped $i: $err"; exit 0;; esac
            i=$((i+1))
        done
        echo "never stopped"
    """


def kept_bytes(cache: Path) -> int:
    return sum(p.stat().st_size for p in cache.rglob("kept/*/*") if p.is_file())


def test_another_user_fills_the_local_budget_then_gets_enospc_until_rm(
    mount_factory: Callable[..., MountedStore], shared_dir: Path, tmp_path: Path
) -> None:
    m = mount_factory(mount=False)
    point = shared_dir / "mnt"
    point.mkdir()
    cache = tmp_path / "cache"
    mounted = MountedStore(
        path=point, store_id=m.store_id, store_name=m.store_name, sdk=m.sdk, env=m.env,
        log_file=tmp_path / "budget.log",
        extra_args=["--allow-other", "--uid", str(NOBODY), "--gid", str(NOBODY),
                    "--local-bytes", "1M", "--cache-dir", str(cache)],
    )  # fmt: skip
    try:
        assert mounted.mount().returncode == 0, mounted.log()
        # local-only files (a repository inside the mount): the tenth file no longer fits
        stopped = as_nobody("mkdir .git && " + fill(".git/f", "a"), point)
        assert stopped.startswith("stopped 10: "), stopped
        # the status file is written every second
        status = wait_for(lambda: (s := mounted.status()["local_budget"])["enospc"] and s)
        assert status["full"] and status["limit_bytes"] == BUDGET
        text = memfs("status", str(point), env=m.env).stdout
        assert f"local bytes      {status['used_bytes']:,} of {BUDGET:,} " in text, text
        assert "FULL since" in text and "get ENOSPC" in text, text
        assert as_nobody("rm -rf .git && echo x > .x.swp && echo done", point) == "done"
        wait_for(lambda: not mounted.status()["local_budget"]["full"])

        # refused content (not UTF-8): each close is EILSEQ and charged, the eleventh write
        # does not fit (what did is refused at its close too)
        stopped = as_nobody("rm .x.swp && " + fill("bin", "\\377"), point)
        assert stopped.startswith("stopped 10: "), stopped
        assert 10 * FILE < kept_bytes(cache) <= BUDGET
        status = wait_for(lambda: (s := mounted.status())["local_budget"]["enospc"] > 1 and s)
        assert len(status["refused"]["files"]) == 11 and status["local_budget"]["full"]
        assert all(status["refused"]["copies"].values())  # where each one's text is
        assert mounted.log().count("the local budget of this mount is full") == 1  # not per write

        as_nobody("rm bin* && echo done", point)
        assert kept_bytes(cache) == 0
        wait_for(lambda: mounted.status()["local_budget"]["used_bytes"] == 0)
        assert as_nobody("echo again > .y.swp && cat .y.swp", point) == "again"
    finally:
        mounted.cleanup()


def test_another_user_fills_a_full_store_s_waiting_files_then_gets_enospc(
    private_mount: Callable[..., MountedStore], fresh_server, shared_dir: Path, tmp_path: Path
) -> None:
    """In a full store every new file waits for room in the root daemon's memory and journal:
    past the budget the next create or write is ENOSPC, nothing accepted is lost, and room in
    the store uploads the files and frees the budget."""
    m = private_mount(mount=False)
    ids = seed(fresh_server.db, m.store_id, 2_000)  # full
    point = shared_dir / "mnt"
    point.mkdir()
    mounted = MountedStore(
        path=point, store_id=m.store_id, store_name=m.store_name, sdk=m.sdk, env=m.env,
        log_file=tmp_path / "waiting.log",
        extra_args=["--allow-other", "--uid", str(NOBODY), "--gid", str(NOBODY),
                    "--local-bytes", "1M", "--cache-dir", str(tmp_path / "cache")],
    )  # fmt: skip
    try:
        assert mounted.mount().returncode == 0, mounted.log()
        as_nobody("echo first > first.md", point)
        # its upload is refused: the store is full (so the next new files are charged at once)
        wait_for(lambda: mounted.status()["uploads"]["waiting_for_room"] == ["/first.md"])
        stopped = as_nobody(fill("w", "a"), point)
        assert stopped.startswith("stopped 10: "), stopped  # 10 x 100 kB fit in 1 MiB
        status = wait_for(lambda: (s := mounted.status())["local_budget"]["enospc"] and s)
        assert status["local_budget"]["full"]
        assert BUDGET - FILE < status["local_budget"]["used_bytes"] <= BUDGET
        # each one's create is refused in turn (after its new-file delay)
        waiting = wait_for(
            lambda: "/w9" in (w := mounted.status()["uploads"]["waiting_for_room"]) and w
        )
        assert {"/first.md", *(f"/w{i}" for i in range(10))} <= set(waiting), waiting
        text = memfs("status", str(point), env=m.env).stdout
        assert "FULL since" in text and "files waiting for the store" in text, text
        assert as_nobody("cat w9 | wc -c", point) == str(FILE)  # accepted: never dropped
        for memory_id in ids[:20]:  # room in the store: the waiting files are uploaded
            m.sdk.beta.memory_stores.memories.delete(memory_id, memory_store_id=m.store_id)
        as_nobody("sync .", point)  # (or the change feed's deletes) retries them now
        wait_for(lambda: mounted.status()["local_budget"]["used_bytes"] == 0, timeout=30)
        assert m.content("/first.md") == "first\n"
        assert m.content("/w9") == "a" * FILE
        assert as_nobody("echo again > again.md && cat again.md", point) == "again"
    finally:
        mounted.cleanup()
