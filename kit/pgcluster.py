"""A throwaway PostgreSQL cluster for tests and benchmarks: initdb + pg_ctl in a temp directory.

No system service is used: the cluster listens only on a unix socket inside its own directory,
trusts local connections, and runs with durability off (fsync, synchronous_commit,
full_page_writes) because it is thrown away. PostgreSQL refuses to run as root, so as root the
binaries run as the ``postgres`` user (``runuser``) and the directory is handed to that user.

``PgCluster.find_bin()`` returns None when the binaries are absent (tests then skip); CI and
``make setup`` install Debian's ``postgresql`` package.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

USER = "memfs"


@dataclass
class PgCluster:
    bindir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="memfs-pg-")))
    port: int = 5432
    running: bool = False

    @staticmethod
    def find_bin() -> Path | None:
        override = os.environ.get("MEMFS_PG_BIN")
        candidates = [override] if override else []
        candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
        for candidate in candidates:
            if candidate and (Path(candidate) / "initdb").exists():
                return Path(candidate)
        found = shutil.which("initdb")
        return Path(found).parent if found else None

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _as_owner(self, *argv: str) -> list[str]:
        if os.geteuid() != 0:
            return list(argv)
        return ["runuser", "-u", "postgres", "--", *argv]

    def start(self) -> None:
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        os.chmod(self.root, 0o755)
        subprocess.run(
            self._as_owner(
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                USER,
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ),
            check=True,
            capture_output=True,
        )
        self.start_again()

    def start_again(self) -> None:
        """Start the initialised cluster (after ``shut_down``)."""
        options = (
            f"-k {self.root} -c listen_addresses='' -p {self.port} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        subprocess.run(
            self._as_owner(
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                "30",
                "start",
            ),
            check=True,
            capture_output=True,
        )
        self.running = True

    def shut_down(self) -> None:
        """Stop the server and keep its data (a restart: ``start_again``); clients connected
        to it lose their connections, new ones are refused."""
        subprocess.run(
            self._as_owner(
                str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"
            ),
            check=True,
            capture_output=True,
        )
        self.running = False

    def stop(self) -> None:
        if self.running:
            subprocess.run(
                self._as_owner(
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ),
                capture_output=True,
            )
            self.running = False
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{USER}@/{dbname}?host={self.root}&port={self.port}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        name = f"{prefix}_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)
