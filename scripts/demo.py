"""`make demo`: memfs on its embedded default, from nothing.

Starts a reference server on a throwaway database, creates a demo store with a few memories,
mounts it, and walks through a short tour with ordinary tools (ls, cat, an edit), then shows the
version the edit stored and unmounts. With ``--keep`` the mount stays up until Ctrl-C so you can
explore it from another terminal.

The API key is generated here and passed to child processes through the environment only.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

MEMFS = [sys.executable, "-m", "memfs"]
SAMPLES = {
    "/README.md": "# Demo Memory\n\nA memory store mounted as a directory by memfs.\n",
    "/notes/todo.md": "- [ ] try `grep -r` over the mount\n- [ ] edit a memory in vim\n",
    "/notes/ideas.md": "Memories are small UTF-8 documents addressed by paths.\n",
    "/projects/memfs/status.md": "status: demo running\n",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def run(cmd: list[str], env: dict[str, str], *, shell_view: str | None = None) -> str:
    shown = shell_view or shlex.join(["memfs", *cmd[3:]] if cmd[:3] == MEMFS else cmd)
    print(f"$ {shown}", flush=True)
    done = subprocess.run(cmd, env=env, text=True, capture_output=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"demo: command failed ({done.returncode}): {shown}")
    return done.stdout


def wait_healthy(base_url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("demo: the server exited at start-up")
        try:
            if httpx.get(base_url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("demo: the server did not start within 20 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="stay mounted until Ctrl-C")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memfs-demo-"))
    key = "sk-demo-" + secrets.token_urlsafe(24)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    server_env = {**os.environ, "MEMFS_API_KEYS": key}
    env = {**os.environ, "ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": base_url}
    env.pop("MEMFS_API_KEYS", None)
    env["XDG_CACHE_HOME"] = str(work / "cache")  # the mount's journal goes with the demo
    memfs = MEMFS
    mountpoint = work / "mnt" / "demo-memory"
    mountpoint.mkdir(parents=True)

    banner(f"starting a reference server on {base_url} (database {work / 'demo.db'})")
    server_log = open(work / "server.log", "wb")  # noqa: SIM115 - closed in finally
    server = subprocess.Popen(
        [*memfs, "server", "--db", str(work / "demo.db"), "--port", str(port)],
        env=server_env,
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    mounted = False
    try:
        wait_healthy(base_url, server)
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

        if args.keep:
            banner(f"mounted at {mountpoint}; press Ctrl-C to unmount and stop")
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
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        server_log.close()
        # Never walk into a mount that is still up: rmtree would delete memories.
        if not os.path.ismount(mountpoint):
            shutil.rmtree(work, ignore_errors=True)
    banner("done: the server and its throwaway database are gone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
