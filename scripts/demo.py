"""`make demo` (``python -m scripts.demo``): memfs on its embedded default, from nothing.

Starts a reference server on a throwaway database, creates a demo store with a few memories,
mounts it, and walks through a short tour with ordinary tools (ls, cat, an edit, a search), then
shows the version the edit stored and the store's history exported as a git repository. Then the
same server's Databricks Agent Memory API: a store with one actor's entries, mounted with
``--api databricks``, its descriptions as extended attributes, and a search. Then a sandbox
session: two more stores (one read-only) served by one process under one root, local scratch
beside them, its status, and its stop. Everything is unmounted at the end. With ``--keep`` the
two mounts (not the session, stopped by its tour) stay up until Ctrl-C so you can explore them
from another terminal, and the server's console in a browser (the key to sign in with is then
written to a 0600 file, never printed).

The API key is generated here and passed to child processes through the environment only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from kit.servers import ServerProcess, free_port

MEMFS = [sys.executable, "-m", "memfs"]
DATABRICKS_STORE = "demo-agent-memory"
DATABRICKS_ACTOR = "demo-agent"
# path: (description, content) of the Databricks store's entries, all of DATABRICKS_ACTOR
DATABRICKS_SAMPLES = {
    "/people/dana.md": (
        "Dana, the project's designer: how and when to reach her",
        "Dana prefers a Slack DM to e-mail and answers in the mornings (CET).\n",
    ),
    "/projects/launch.md": (
        "The launch plan and its open risks",
        "Launch on the 14th. Open risk: the payment provider's sandbox is flaky.\n",
    ),
    "/preferences/style.md": (
        "How the user likes answers written",
        "Short answers, bullet points, no emoji.\n",
    ),
}
SAMPLES = {
    "/README.md": "# Demo Memory\n\nA memory store mounted as a directory by memfs.\n",
    "/notes/todo.md": "- [ ] try `grep -r` over the mount\n- [ ] edit a memory in vim\n",
    "/notes/ideas.md": "Memories are small UTF-8 documents addressed by paths.\n",
    "/projects/memfs/status.md": "status: demo running\n",
}


def banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def run(
    cmd: list[str], env: dict[str, str], *, shell_view: str | None = None, stdin: str = ""
) -> str:
    shown = shell_view or shlex.join(["memfs", *cmd[3:]] if cmd[:3] == MEMFS else cmd)
    print(f"$ {shown}", flush=True)
    done = subprocess.run(cmd, env=env, text=True, capture_output=True, check=False, input=stdin)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"demo: command failed ({done.returncode}): {shown}")
    return done.stdout


def databricks_tour(base_url: str, key: str, point: Path, env: dict[str, str]) -> None:
    """Create a Databricks Agent Memory store on the same server, mount one actor's entries at
    ``point`` and search them."""
    db_env = {**env, "DATABRICKS_HOST": base_url, "DATABRICKS_TOKEN": key}
    api = httpx.Client(
        base_url=f"{base_url}/api/2.0/agents",
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    banner(f"the same server speaks Databricks Agent Memory: store {DATABRICKS_STORE!r}")
    with api:
        created = api.post(
            "/memory-stores",
            params={"managed_memory_store_id": DATABRICKS_STORE},
            json={"description": "memfs demo (Databricks Agent Memory)"},
        )
        created.raise_for_status()
        for path, (description, content) in DATABRICKS_SAMPLES.items():
            print(f"$ POST …/memory-stores/{DATABRICKS_STORE}/entries  ({path})", flush=True)
            entry = {"actor_id": DATABRICKS_ACTOR, "path": path, "content": content}
            api.post(
                f"/memory-stores/{DATABRICKS_STORE}/entries",
                json={**entry, "description": description},
            ).raise_for_status()
    point.mkdir(parents=True)
    banner(f"mounting actor {DATABRICKS_ACTOR!r}'s entries at {point}")
    print("$ export DATABRICKS_HOST=… DATABRICKS_TOKEN=…", flush=True)
    as_actor = ["--api", "databricks", "--actor", DATABRICKS_ACTOR]
    run([*MEMFS, "mount", DATABRICKS_STORE, str(point), *as_actor], db_env)
    run(["ls", "-R", str(point)], db_env)
    run(["getfattr", "-n", "user.description", str(point / "people" / "dana.md")], db_env)
    banner("searching its entries: .search/ in the mount, or memfs search")
    query = "how do I contact the designer"
    shown = f'cat "{point}/.search/{query}"'
    run(["cat", str(point / ".search" / query)], db_env, shell_view=shown)
    run([*MEMFS, "search", DATABRICKS_STORE, "payment risk", *as_actor, "--limit", "3"], db_env)


def session_tour(work: Path, root: Path, env: dict[str, str]) -> None:
    """Two new stores (one read-only) as one sandbox session under ``root``: one process, one
    mount, each store a directory, every other name local scratch; then ``memfs session stop``
    (the caller stops it again if this fails halfway)."""
    banner("a sandbox session: several stores under one root, served by one process")
    ids = {}
    for name in ("Agent Notes", "Team Wiki"):
        created = run([*MEMFS, "stores", "create", name], env)
        ids[name] = re.findall(r"\((memstore_\w+)\)", created)[0]
    run([*MEMFS, "memories", "put", "Team Wiki", "/onboarding.md", "-"], env,
        shell_view="memfs memories put 'Team Wiki' /onboarding.md - <<< …",
        stdin="Ask in #help; be brief.\n")  # fmt: skip
    config = work / "session.json"
    config.write_text(
        json.dumps(
            [
                {"type": "memory_store", "memory_store_id": ids["Agent Notes"]},
                {
                    "type": "memory_store",
                    "memory_store_id": ids["Team Wiki"],
                    "access": "read_only",
                    "instructions": "Team conventions. Read first.",
                },
            ]
        )
    )
    print(f"$ cat {config}\n{config.read_text()}", flush=True)
    prompt = work / "prompt.md"
    run([*MEMFS, "session", "--config", str(config), "--root", str(root), "--detach",
         "--prompt-file", str(prompt)], env)  # fmt: skip
    run(["head", "-n", "12", str(prompt)], env)
    run(["ls", str(root)], env)
    run(["cat", str(root / "team-wiki" / "onboarding.md")], env)
    draft, notes = shlex.quote(f"{root}/draft.txt"), shlex.quote(f"{root}/agent-notes/")
    shell = f"echo 'a draft' > {draft} && mv {draft} {notes}"
    run(["sh", "-c", shell], env, shell_view=shell + "   # scratch, then copied into a store")
    refused = f"echo x > {shlex.quote(f'{root}/team-wiki/new.md')}"
    print(f"$ {refused}", flush=True)
    done = subprocess.run(["sh", "-c", refused], env=env, text=True, capture_output=True)
    sys.stdout.write(done.stderr)  # read-only: "Read-only file system"
    run([*MEMFS, "session", "status", "--root", str(root)], env)
    run([*MEMFS, "session", "stop", "--root", str(root)], env)
    run([*MEMFS, "memories", "ls", "Agent Notes"], env)  # the stop uploaded the copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="stay mounted until Ctrl-C")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memfs-demo-"))
    key = "sk-demo-" + secrets.token_urlsafe(24)
    server = ServerProcess(db=work / "demo.db", port=free_port(), keys=[key])
    base_url = server.base_url
    env = {**os.environ, "ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": base_url}
    env.pop("MEMFS_API_KEYS", None)
    env["XDG_CACHE_HOME"] = str(work / "cache")  # the mount's journal goes with the demo
    env["MEMFS_STATE_DIR"] = str(work / "state")  # and the session's state file
    memfs = MEMFS
    mountpoint = work / "mnt" / "demo-memory"
    mountpoint.mkdir(parents=True)

    banner(f"starting a reference server on {base_url} (database {work / 'demo.db'})")
    mounted = False
    db_mountpoint = work / "mnt" / DATABRICKS_STORE
    session_root = work / "mnt" / "memory"
    try:
        server.start()
        banner("creating the store 'Demo Memory' with a few memories")
        run([*memfs, "stores", "create", "Demo Memory", "--description", "memfs demo"], env)
        for path, content in SAMPLES.items():
            print(f"$ memfs memories put 'Demo Memory' {path} - <<< …", flush=True)
            subprocess.run(
                [*memfs, "memories", "put", "Demo Memory", path, "-"],
                input=content,
                text=True,
                env=env,
                check=True,
                capture_output=True,
            )
        run([*memfs, "memories", "ls", "Demo Memory", "-r"], env)

        banner(f"mounting it at {mountpoint}")
        # Writes through the mount are attributed to this session in the store's history.
        session = "sesn_demo" + secrets.token_hex(4)
        run([*memfs, "mount", "Demo Memory", str(mountpoint), "--session-id", session], env)
        mounted = True
        os.chdir(mountpoint)
        run(["ls", "-lR"], env)
        run(["cat", "notes/todo.md"], env)
        run(["grep", "-rn", "memfs", "."], env)

        banner("editing a memory with ordinary tools (sed -i keeps the memory's id)")
        todo = "notes/todo.md"
        run(["sed", "-i", "s/- \\[ \\] try/- [x] try/", todo], env)
        with open(todo, "a", encoding="utf-8") as handle:
            handle.write("- [ ] read docs/semantics.md\n")
            handle.flush()
            os.fsync(handle.fileno())  # fsync uploads at once
        print(f"$ echo '- [ ] read docs/semantics.md' >> {todo}  (and fsync)")
        run(["cat", str(todo)], env)

        banner("the store now holds new versions of the same memory")
        run([*memfs, "memories", "log", "Demo Memory", "/notes/todo.md"], env)

        banner("its history as a git repository: one commit per version (memfs export --git)")
        exported = work / "export"
        run([*memfs, "export", "Demo Memory", str(exported), "--git"], env)
        run(
            ["git", "-C", str(exported), "log", "--format=%h %ad %an  %s", "--date=format:%T"],
            env,
            shell_view="git -C export log --format='%h %ad %an  %s'",
        )

        banner("searching from the shell: read .search/<words> (never listed, read-only)")
        run(["cat", ".search/small documents"], env, shell_view='cat ".search/small documents"')

        os.chdir(work)
        databricks_tour(base_url, key, db_mountpoint, env)
        session_tour(work, session_root, env)

        if args.keep:
            key_file = work / "api-key"  # 0600: the key is never printed
            key_file.touch(mode=0o600)
            key_file.write_text(key + "\n")
            banner(
                f"mounted at {mountpoint} and {db_mountpoint}; the console is at "
                f"{base_url}/console (sign in with the key in {key_file}); "
                "press Ctrl-C to unmount"
            )
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    finally:
        os.chdir(work)
        if mounted:
            banner("unmounting (pending writes are flushed first)")
            subprocess.run([*memfs, "umount", str(mountpoint)], env=env, check=False)
        if os.path.ismount(db_mountpoint):
            subprocess.run([*memfs, "umount", str(db_mountpoint)], env=env, check=False)
        if os.path.ismount(session_root):  # the tour stopped halfway
            subprocess.run([*memfs, "umount", str(session_root)], env=env, check=False)
        server.stop()
        # Never walk into a mount that is still up: rmtree would delete memories.
        if not any(os.path.ismount(p) for p in (mountpoint, db_mountpoint, session_root)):
            shutil.rmtree(work, ignore_errors=True)
    banner("done: the server and its throwaway database are gone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
