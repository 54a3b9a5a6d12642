"""The supervisor of a sandbox session: the one process that owns a session's mounts.

Given a checked mount plan (``memfs.session.plan.plan_mounts``), it creates the mount directories,
runs ``memfs mount`` for every store (each mount is its own daemon process: pyfuse3 allows one
mount per process), writes the state file, and then watches: every ``poll_interval`` seconds it
checks each mount point, and a dead mount (its daemon gone: ENOTCONN) or a vanished one is
reported, lazily unmounted and mounted again, a bounded number of times. On SIGTERM, SIGINT or
SIGHUP (``memfs session stop`` sends SIGTERM) it flushes and unmounts every store with
``memfs umount``, in parallel and bounded by ``flush_timeout`` in all, reports what was not
uploaded, lazily unmounts anything left, and removes the directories it created.

What was not uploaded is not lost: a mount keeps every change acknowledged to a program (a file
closed, fsynced, renamed, removed) in its write-back journal on disk until the server has it,
and the next mount of the same store on this machine (same cache directory) uploads it. The
stop report (``stop_report``) says, once per change, what was not uploaded and in which journal
directory it is kept: it quotes the daemon's unmount report
(``memfs.mount.status.unmount_report``, the JSON document ``memfs umount --json`` prints), never
the daemon's log or another command's text.

Invariants:
- nothing is mounted before the whole plan was checked (the caller's job) and every directory
  was created; a failure while mounting unmounts what was mounted and removes what was created;
- only directories this supervisor created are removed, and only with ``rmdir`` (never a
  recursive delete: a directory that is not empty after unmounting is reported and kept);
- the teardown runs even when the watch fails, shielded from cancellation, and is bounded.

It must not talk to the API (the mount daemons do), nor parse configs or render prompts.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from memfs.mount.status import REPORT_TYPE, report_sections
from memfs.session.plan import MountPlan, SessionState, check_mount_path

log = logging.getLogger(__name__)

POLL_INTERVAL = 2.0  # seconds between health checks of the mounts
FLUSH_TIMEOUT = 30.0  # seconds for flushing and unmounting every store, in all
MOUNT_TIMEOUT = 60.0  # seconds for one `memfs mount` to report a usable mount
STAT_TIMEOUT = 10.0  # a mount point that does not answer stat() within this is "not responding"
MAX_REMOUNTS = 3  # per store and session: a mount that keeps dying is left dead and reported

EXIT_OK = 0
EXIT_FAILED = 1

UNUPLOADED_NOTE = (
    "changes it had acknowledged stay in its write-back journal on disk and are uploaded by the "
    "next mount of this store"
)


@dataclass(frozen=True)
class MountCommand:
    """How to run ``memfs mount`` / ``memfs umount``: the program, options, environment.

    A Databricks store is mounted with ``--api databricks --actor A [--session S]`` and the
    ``databricks_options``; a Memory Stores store with the session id (its writes' attribution)
    and the ``memory_stores_options``: ``memfs mount`` refuses each API's options on the other.
    """

    program: tuple[str, ...] = (sys.executable, "-m", "memfs")
    mount_options: tuple[str, ...] = ()  # passed to every mount, e.g. ("--debug",)
    memory_stores_options: tuple[str, ...] = ()  # e.g. ("--api-key-file", F)
    databricks_options: tuple[str, ...] = ()  # e.g. ("--profile", NAME)
    env: dict[str, str] | None = None  # None: inherit

    def mount_argv(
        self, plan: MountPlan, session_id: str, log_file: Path | None = None
    ) -> list[str]:
        argv = [*self.program, "mount", plan.store.id, str(plan.path)]
        attachment = plan.attachment
        if attachment.databricks:
            assert attachment.actor_id is not None  # parse_config requires it
            argv += ["--api", "databricks", "--actor", attachment.actor_id]
            if attachment.session_id:
                argv += ["--session", attachment.session_id]
            argv += self.databricks_options
        else:
            argv += ["--session-id", session_id, *self.memory_stores_options]
        if plan.read_only:
            argv.append("--read-only")
        if log_file is not None:
            argv += ["--log-file", str(log_file)]
        return argv + list(self.mount_options)

    def umount_argv(self, path: Path) -> list[str]:
        return [*self.program, "umount", "--json", str(path)]


@dataclass
class _Mount:
    plan: MountPlan
    mounted: bool = False
    created_dir: bool = False
    remounts: int = 0
    given_up: bool = False
    problems: list[str] = field(default_factory=list)


class MountError(Exception):
    """A store could not be mounted; the message is one line for a person."""


async def run_command(
    argv: list[str], *, env: dict[str, str] | None, timeout: float
) -> tuple[int | None, str]:
    """Run a command; return (its exit code, or None on timeout; its output, stripped)."""
    code, output, _ = await _run(argv, env=env, timeout=timeout, stdout_apart=False)
    return code, output


async def _run(
    argv: list[str], *, env: dict[str, str] | None, timeout: float, stdout_apart: bool
) -> tuple[int | None, str, str]:
    """Run a command: (its exit code, or None on timeout; its output, stripped; "" or, with
    ``stdout_apart``, its stdout, which the output then leaves out).

    Output goes to temporary files rather than pipes: a daemon that inherits them and keeps
    them open after the command returns must not make us wait for the daemon's end.
    """
    with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as apart:
        code: int | None = None
        with trio.move_on_after(timeout):
            done = await trio.run_process(
                argv,
                stdin=b"",
                stdout=apart if stdout_apart else output,
                stderr=output,
                env=env,
                check=False,
            )
            code = done.returncode
        output.seek(0)
        apart.seek(0)
        text = output.read().decode("utf-8", "replace").strip()
        return code, text, apart.read().decode("utf-8", "replace")


def last_line(text: str) -> str:
    """The last non-empty line of a command's output: its one-line reason."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


DEAD = "dead (transport endpoint is not connected: its daemon is gone)"


def daemon_gone(path: Path) -> bool:
    """True when the pid file of the mount at ``path`` names a process that has exited.

    ``stat`` alone cannot tell: the kernel answers it from cached attributes, without asking
    the (dead) daemon, until they time out. False when there is no pid file to go by.
    """
    # Imported here: the daemon imports pyfuse3, and this module must import without it.
    from memfs.mount.statedir import state_path as daemon_state_path

    try:
        pid = int(daemon_state_path(str(path), "pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat_file:
            state = stat_file.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")  # a zombie has closed its FUSE connection already


def mount_health(path: Path) -> str | None:
    """None if ``path`` is a live mount point, else what is wrong with it (blocking)."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOTCONN, errno.ECONNABORTED):
            return DEAD
        return f"unusable ({exc.strerror})"
    if not os.path.ismount(path):
        return "no longer mounted"
    if daemon_gone(path):
        return DEAD
    return None


def lazy_unmount(path: Path) -> bool:
    """Detach a (possibly dead) mount point now, whatever still uses it (blocking)."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    argv = [tool, "-uz", str(path)] if tool else ["umount", "-l", str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=15)
    if done.returncode != 0:
        log.warning("lazy unmount of %s failed: %s", path, last_line(done.stderr))
    return done.returncode == 0


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) about our state; a no-op outside systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode("utf-8"))
    except OSError as exc:
        log.warning("cannot notify systemd: %s", exc)


class Supervisor:
    """Mounts a session's stores, watches them, and tears everything down at the end."""

    def __init__(
        self,
        plans: list[MountPlan],
        *,
        root: Path,
        session_id: str,
        state_file: Path,
        command: MountCommand | None = None,
        log_file: str | None = None,
        poll_interval: float = POLL_INTERVAL,
        flush_timeout: float = FLUSH_TIMEOUT,
        mount_timeout: float = MOUNT_TIMEOUT,
    ) -> None:
        self._mounts = [_Mount(plan) for plan in plans]
        self._root = root
        self._session_id = session_id
        self._state_file = state_file
        self._command = command or MountCommand()
        self._log_file = log_file
        self._poll_interval = poll_interval
        self._flush_timeout = flush_timeout
        self._mount_timeout = mount_timeout
        self._created_root = False
        self._problems: list[str] = []

    def mount_log(self, plan: MountPlan) -> Path:
        """Where the daemon of one mount logs: next to the state file, one per store."""
        return self._state_file.with_name(f"{self._state_file.stem}.{plan.slug}.log")

    # -- state file -----------------------------------------------------------------------

    def _write_state(self, status: str) -> None:
        state = SessionState(
            pid=os.getpid(),
            root=str(self._root),
            session_id=self._session_id,
            status=status,
            mounts=[
                {**m.plan.to_json(), "mounted": m.mounted, "remounts": m.remounts}
                for m in self._mounts
            ],
            problems=self._problems + [p for m in self._mounts for p in m.problems],
            log_file=self._log_file,
        )
        try:
            state.write(self._state_file)
        except OSError as exc:
            log.warning("cannot write session state %s: %s", self._state_file, exc)

    # -- the whole life -------------------------------------------------------------------

    async def run(self, *, ready: Callable[[], None] | None = None) -> int:
        """Mount, call ``ready``, watch until a signal, tear down; return the exit code.

        Raises MountError (after undoing everything) when a store cannot be mounted.
        """
        failure: MountError | None = None
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            try:
                self._write_state("starting")
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._stop_on_signal, signals, nursery.cancel_scope)
                    try:
                        await self._mount_all()
                    except MountError as exc:
                        failure = exc
                        nursery.cancel_scope.cancel()
                    else:
                        self._write_state("running")
                        log.info(
                            "session %s: %d stores mounted under %s",
                            self._session_id,
                            len(self._mounts),
                            self._root,
                        )
                        sd_notify("READY=1")
                        if ready is not None:
                            ready()
                        await self._watch()
            finally:
                with trio.CancelScope(shield=True):
                    sd_notify("STOPPING=1")
                    await self._teardown()
        if failure is not None:
            for problem in self._all_problems():
                log.error("%s", problem)
            self._state_file.unlink(missing_ok=True)
            raise failure
        problems = self._all_problems()
        for problem in problems:
            log.error("%s", problem)
        if problems:
            self._write_state("stopped")
            return EXIT_FAILED
        self._state_file.unlink(missing_ok=True)
        log.info("session %s stopped; every mount flushed and removed", self._session_id)
        return EXIT_OK

    def _all_problems(self) -> list[str]:
        return self._problems + [p for m in self._mounts for p in m.problems]

    async def _stop_on_signal(self, signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
        async for signum in signals:
            log.info("received %s: stopping the session", signal.Signals(signum).name)
            scope.cancel()
            return

    # -- mounting -------------------------------------------------------------------------

    async def _mount_all(self) -> None:
        if not self._root.exists():
            self._root.mkdir(parents=True)
            self._created_root = True
        for mount in self._mounts:
            try:
                mount.plan.path.mkdir()
                mount.created_dir = True
            except FileExistsError:
                pass  # an empty directory, as checked
            if mount.plan.path.is_symlink():  # planted since the check: never mounted through
                raise MountError(check_mount_path(mount.plan.path)[0])
        failures: list[str] = []

        async def one(mount: _Mount) -> None:
            try:
                await self._mount(mount)
            except MountError as exc:
                failures.append(str(exc))

        async with trio.open_nursery() as nursery:
            for mount in self._mounts:
                nursery.start_soon(one, mount)
        if failures:
            raise MountError("; ".join(sorted(failures)))

    async def _mount(self, mount: _Mount) -> None:
        plan = mount.plan
        argv = self._command.mount_argv(plan, self._session_id, self.mount_log(plan))
        code, output = await run_command(argv, env=self._command.env, timeout=self._mount_timeout)
        if output:
            for line in output.splitlines():
                log.debug("memfs mount %s: %s", plan.slug, line)
        if code == 0 and await trio.to_thread.run_sync(os.path.ismount, plan.path):
            mount.mounted = True
            log.info(
                "mounted %s at %s %s",
                plan.described,
                plan.path,
                "read-only" if plan.read_only else "read-write",
            )
            return
        if code is None:
            reason = f"no usable mount within {self._mount_timeout:g} s"
        elif code == 0:
            reason = "`memfs mount` succeeded but nothing is mounted there"
        else:
            reason = last_line(output) or f"`memfs mount` exited with status {code}"
        raise MountError(f"cannot mount {plan.store.id} at {plan.path}: {reason}")

    # -- watching -------------------------------------------------------------------------

    async def _watch(self) -> None:
        while True:
            await trio.sleep(self._poll_interval)
            for mount in self._mounts:
                if mount.given_up:
                    continue
                health: str | None = "not responding (stat() did not return)"
                with trio.move_on_after(STAT_TIMEOUT):
                    health = await trio.to_thread.run_sync(
                        mount_health, mount.plan.path, abandon_on_cancel=True
                    )
                if health is not None:
                    await self._recover(mount, health)

    async def _recover(self, mount: _Mount, health: str) -> None:
        plan = mount.plan
        log.error("mount of %s at %s is %s", plan.store.id, plan.path, health)
        if health.startswith("not responding"):
            return  # a hung daemon may still hold unsaved data: leave it, keep reporting
        mount.mounted = False
        if mount.remounts >= MAX_REMOUNTS:
            mount.given_up = True
            mount.problems.append(
                f"{plan.path}: the mount died {mount.remounts + 1} times; not remounting again"
            )
            self._write_state("running")
            return
        if await trio.to_thread.run_sync(os.path.ismount, plan.path) or health.startswith("dead"):
            await trio.to_thread.run_sync(lazy_unmount, plan.path)
        if not plan.read_only:
            log.warning(
                "%s: the remount uploads the changes the dead mount had acknowledged but not "
                "uploaded (kept in its write-back journal); writes to files still open when it "
                "died are lost",
                plan.path,
            )
        mount.remounts += 1
        try:
            await self._mount(mount)
            log.warning("remounted %s at %s (remount %d)", plan.store.id, plan.path, mount.remounts)
        except MountError as exc:
            log.error("%s", exc)
        self._write_state("running")

    # -- the end --------------------------------------------------------------------------

    async def _teardown(self) -> None:
        self._write_state("stopping")
        mounted = [m for m in self._mounts if m.mounted]
        if mounted:
            log.info(
                "flushing and unmounting %d stores (at most %g s)",
                len(mounted),
                self._flush_timeout,
            )
        with trio.move_on_after(self._flush_timeout):
            async with trio.open_nursery() as nursery:
                for mount in mounted:
                    nursery.start_soon(self._unmount, mount)
        for mount in self._mounts:
            if mount.mounted:
                mount.problems.append(
                    f"{mount.plan.path}: not unmounted within {self._flush_timeout:g} s (detached "
                    f"lazily; its daemon may still be uploading); {UNUPLOADED_NOTE}"
                )
                await trio.to_thread.run_sync(lazy_unmount, mount.plan.path)
                mount.mounted = False
            elif await trio.to_thread.run_sync(os.path.ismount, mount.plan.path):
                await trio.to_thread.run_sync(lazy_unmount, mount.plan.path)
        for mount in self._mounts:
            if mount.created_dir:
                self._remove_dir(mount.plan.path, mount.problems)
        if self._created_root:
            self._remove_dir(self._root, self._problems)

    async def _unmount(self, mount: _Mount) -> None:
        report: dict[str, Any] | None = None
        try:
            report = await self._unmount_once(mount)
        finally:
            # what the daemon's final flush could not upload, each change once
            mount.problems += stop_report(mount.plan.path, report)

    async def _unmount_once(self, mount: _Mount) -> dict[str, Any] | None:
        """Run ``memfs umount --json``; the daemon's unmount report, if it printed one."""
        plan = mount.plan
        code, output, stdout = await _run(
            self._command.umount_argv(plan.path),
            env=self._command.env,
            timeout=self._flush_timeout,
            stdout_apart=True,
        )
        for line in output.splitlines():
            log.info("memfs umount %s: %s", plan.slug, line)
        if code is None:
            return None  # the caller reports it with the deadline
        report = _report_of(stdout)
        if code != 0 and not await trio.to_thread.run_sync(os.path.ismount, plan.path):
            if report is None:
                # the daemon left without its report (killed): its journal is all there is
                mount.problems.append(f"{plan.path}: {last_line(output)}; {UNUPLOADED_NOTE}")
            mount.mounted = False
            return report
        if code != 0 and report is None:
            mount.problems.append(
                f"{plan.path}: memfs umount failed: "
                f"{last_line(output) or f'exit status {code}'}; {UNUPLOADED_NOTE}"
            )
            return None
        mount.mounted = await trio.to_thread.run_sync(os.path.ismount, plan.path)
        if not mount.mounted:
            log.info("unmounted %s", plan.path)
        return report

    @staticmethod
    def _remove_dir(path: Path, problems: list[str]) -> None:
        try:
            path.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"cannot remove {path}: {exc.strerror}")


def _report_of(stdout: str) -> dict[str, Any] | None:
    """The unmount report ``memfs umount --json`` printed (None: it printed none)."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return None
    return report if isinstance(report, dict) and report.get("type") == REPORT_TYPE else None


def stop_report(path: Path, report: dict[str, Any] | None) -> list[str]:
    """One problem line per error of the daemon's final flush and per change it could not
    upload as meant (not uploaded: with the journal directory that keeps it; refused; in
    conflict; of a deleted store), each once, from its unmount report."""
    if report is None:
        return []
    problems: dict[str, None] = {}
    for error in report.get("errors") or []:
        problems.setdefault(f"{path}: {' '.join(error.split())}", None)
    for kind, header, items in report_sections(report):
        if kind == "gone":
            problems.setdefault(f"{path}: {header.rstrip(':')}", None)
        fates = [""] * len(items)  # a refused file's or a conflict's line says where it went
        if kind == "pending":
            fates = [
                f" (kept in {p['kept_in']}, uploaded by the next mount of this store)"
                if p["kept_in"]
                else " (lost: the mount had no journal)"
                for p in report["pending"]
            ]
        for item, fate in zip(items, fates, strict=True):
            problems.setdefault(f"{path}: {item}{fate}", None)
    return list(problems)
