"""A sandbox session's memory stores: the config, its validation, the plan, the state file.

A session attaches up to eight stores in the platform's own resource shape (a JSON list, or an
object with ``resources``, of ``{"type": "memory_store", "memory_store_id", "access",
"instructions"}``, and optionally an ``owner`` of every store's files: ``{"uid", "gid",
"umask"}``); one mount at the root serves them all, each store the directory ``<root>/<slug>``.
A Databricks Agent Memory store is the same resource with ``"api": "databricks"``, an
``actor_id`` and optionally a ``session_id`` (whose entries are served). This module owns:

- parsing and checking the config (``load_config``, ``parse_config``), then the stores as the
  API knows them (``check_stores``), then the root and the slugs (``plan_mounts``) — every
  check runs before anything is mounted, and each problem is one line for a person
  (``SessionError``);
- session ids (``new_session_id``) and the state file by which ``memfs session stop`` finds a
  running session (``SessionState``, ``state_path``).

It must not mount, start processes or touch the network: ``memfs.session.stores`` retrieves the
stores (given to ``check_stores`` and ``plan_mounts``), the runner (``memfs.session.runner``)
serves them, ``memfs.session.prompt`` writes what an agent needs to know about them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import secrets
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memfs.api.config import ConfigError
from memfs.contract.models import MemoryStore
from memfs.contract.paths import slug
from memfs.host.private import replace_file
from memfs.mount.owner import Owner, parse_gid, parse_uid, parse_umask

log = logging.getLogger(__name__)

MAX_STORES = 8
MAX_INSTRUCTIONS = 4096  # characters, as the platform counts them
STATE_DIR_ENV = "MEMFS_STATE_DIR"
SESSION_ID_PREFIX = "sesn_"
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,127}")
_ID_ALPHABET = string.ascii_letters + string.digits

Access = Literal["read_write", "read_only"]
ACCESS_VALUES: tuple[Access, ...] = ("read_write", "read_only")
StoreApi = Literal["memory_stores", "databricks"]
MEMORY_STORES: StoreApi = "memory_stores"
DATABRICKS: StoreApi = "databricks"
# Fields the platform returns on a session's resources (snapshotted at attach time, output-only):
# accepted so that a resources list copied from the API works, but the live store decides.
_OUTPUT_ONLY_FIELDS = frozenset({"name", "description", "mount_path", "id"})
_INPUT_FIELDS = frozenset({"type", "memory_store_id", "access", "instructions"})
_DATABRICKS_FIELDS = frozenset({"api", "actor_id", "session_id"})  # "api" also on Memory Stores


class SessionError(ConfigError):
    """The session cannot start; ``problems`` holds one line per reason, meant for a person."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# ---------------------------------------------------------------------------------------------
# The config


@dataclass(frozen=True)
class Attachment:
    """One memory store attached to the session, as the config asks for it."""

    memory_store_id: str
    access: Access = "read_write"
    instructions: str = ""
    index: int = 0  # position in the resources list, for messages
    api: StoreApi = MEMORY_STORES
    actor_id: str | None = None  # Databricks: whose entries are mounted (required there)
    session_id: str | None = None  # Databricks: only this session's entries (None: session-less)

    @property
    def read_only(self) -> bool:
        return self.access == "read_only"

    @property
    def databricks(self) -> bool:
        return self.api == DATABRICKS

    @property
    def store_key(self) -> str:
        """The key of the attached store in ``fetch_stores``' answers: ids of the two APIs may
        coincide, and "/" is in neither."""
        return f"databricks/{self.memory_store_id}" if self.databricks else self.memory_store_id

    @property
    def described(self) -> str:
        """The attachment in a message: the store, and for Databricks its actor and session."""
        if not self.databricks:
            return self.memory_store_id
        session = f", session {self.session_id}" if self.session_id else ""
        return f"Databricks store {self.memory_store_id} (actor {self.actor_id}{session})"


@dataclass(frozen=True)
class SessionConfig:
    attachments: list[Attachment]
    notes: list[str] = field(default_factory=list)  # things skipped, worth a log line
    owner: Owner = field(default_factory=Owner)  # of every mount's files ("owner" in the config)


def load_config(path: str | os.PathLike[str]) -> SessionConfig:
    """Read and parse a session config file (see ``parse_config``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SessionError(
            [f"cannot read session config {os.fspath(path)}: {exc.strerror}"]
        ) from None
    except UnicodeDecodeError:
        raise SessionError([f"session config {os.fspath(path)} is not UTF-8 text"]) from None
    return parse_config(text, source=os.fspath(path))


def parse_config(text: str, *, source: str = "session config") -> SessionConfig:
    """Parse the resources of a session; raise SessionError listing every problem found.

    Resources of other types (files, repositories) are skipped with a note: memfs mounts only
    memory stores. Unknown fields of a memory_store resource are errors (a typo such as
    ``acess`` must not silently attach a store read-write).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionError(
            [f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]
        ) from None
    owner_field = data.get("owner") if isinstance(data, dict) else None
    if isinstance(data, dict):
        if "resources" not in data:
            raise SessionError(
                [f"{source}: expected a list of resources or an object with 'resources'"]
            )
        data = data["resources"]
    if not isinstance(data, list):
        raise SessionError([f"{source}: 'resources' must be a list, not {_json_type(data)}"])

    problems: list[str] = []
    notes: list[str] = []
    attachments: list[Attachment] = []
    owner = _parse_owner(owner_field, problems)
    for index, item in enumerate(data):
        where = f"resources[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object, not {_json_type(item)}")
            continue
        kind = item.get("type")
        if kind != "memory_store":
            if not isinstance(kind, str) or not kind:
                problems.append(f"{where} has no 'type'")
            else:
                notes.append(f"{where} is a {kind!r} resource; memfs mounts only memory stores")
            continue
        attachment = _parse_attachment(item, index, problems)
        if attachment is not None:
            attachments.append(attachment)

    if len(attachments) > MAX_STORES:
        problems.append(
            f"the session attaches {len(attachments)} memory stores; "
            f"at most {MAX_STORES} are allowed"
        )
    seen: dict[tuple[str, str | None, str | None], int] = {}
    for attachment in attachments:
        # a Databricks store may be attached once per actor and session: each is another mount
        key = (attachment.store_key, attachment.actor_id, attachment.session_id)
        first = seen.setdefault(key, attachment.index)
        if first != attachment.index:
            problems.append(
                f"resources[{attachment.index}] attaches {attachment.described} again "
                f"(already resources[{first}]); attach each store once"
            )
    if not attachments and not problems:
        problems.append(f"{source} attaches no memory store")
    if problems:
        raise SessionError(problems)
    return SessionConfig(attachments=attachments, notes=notes, owner=owner)


def _parse_owner(value: object, problems: list[str]) -> Owner:
    """The config's ``"owner": {"uid", "gid", "umask"}`` (each optional): who the files of every
    mount belong to, e.g. the user the agent runs as (with ``--allow-other``)."""
    if value is None:
        return Owner()
    if not isinstance(value, dict):
        problems.append(f"'owner' must be an object with uid, gid, umask, not {_json_type(value)}")
        return Owner()
    unknown = sorted(set(value) - {"uid", "gid", "umask"})
    if unknown:
        problems.append(f"'owner' has unknown field(s): {', '.join(unknown)}")
    settings: dict[str, Any] = {}
    for key, parse in (("uid", parse_uid), ("gid", parse_gid), ("umask", parse_umask)):
        if value.get(key) is not None:
            try:
                settings[key] = parse(value[key])
            except ConfigError as exc:
                problems.append(f"owner.{key}: {exc}")
    return Owner(**settings)


def _parse_attachment(item: dict[str, Any], index: int, problems: list[str]) -> Attachment | None:
    where = f"resources[{index}]"
    before = len(problems)
    unknown = sorted(set(item) - _INPUT_FIELDS - _DATABRICKS_FIELDS - _OUTPUT_ONLY_FIELDS)
    if unknown:
        problems.append(f"{where} has unknown field(s): {', '.join(unknown)}")
    api, actor_id, session_id = _parse_api(item, where, problems)
    store_id = item.get("memory_store_id")
    if not isinstance(store_id, str) or not store_id.strip():
        problems.append(f"{where} needs a 'memory_store_id' string")
        store_id = ""
    elif store_id != store_id.strip() or "/" in store_id:
        problems.append(f"{where}: {store_id!r} is not a memory store id")
    access: Access = "read_write"
    given_access = item.get("access")
    if given_access == "read_only":
        access = "read_only"
    elif given_access not in (None, "read_write"):
        problems.append(
            f"{where}: access must be 'read_write' or 'read_only', not {given_access!r}"
        )
    instructions = item.get("instructions")
    if instructions is None:
        instructions = ""
    elif not isinstance(instructions, str):
        problems.append(f"{where}: instructions must be a string, not {_json_type(instructions)}")
        instructions = ""
    elif len(instructions) > MAX_INSTRUCTIONS:
        problems.append(
            f"{where}: instructions for {store_id} are {len(instructions)} characters; "
            f"at most {MAX_INSTRUCTIONS} are allowed"
        )
    if len(problems) > before:
        return None
    return Attachment(
        memory_store_id=store_id,
        access=access,
        instructions=instructions,
        index=index,
        api=api,
        actor_id=actor_id,
        session_id=session_id,
    )


def _parse_api(
    item: dict[str, Any], where: str, problems: list[str]
) -> tuple[StoreApi, str | None, str | None]:
    """The resource's ``api`` (default Memory Stores) and, for Databricks, its actor and
    session: whose entries the mount shows."""
    api = item.get("api", MEMORY_STORES)
    if api not in (MEMORY_STORES, DATABRICKS):
        problems.append(f"{where}: api must be 'memory_stores' or 'databricks', not {api!r}")
        return MEMORY_STORES, None, None
    if api == MEMORY_STORES:
        given = [name for name in ("actor_id", "session_id") if name in item]
        if given:
            verb = "go" if len(given) > 1 else "goes"
            problems.append(
                f'{where}: {" and ".join(given)} {verb} only with "api": "databricks" '
                "(a Memory Stores store has no actors)"
            )
        return MEMORY_STORES, None, None
    ids: list[str | None] = []
    for name in ("actor_id", "session_id"):
        value = item.get(name)
        if value is None:
            if name == "actor_id":
                problems.append(
                    f"{where}: a Databricks store needs an 'actor_id' (whose entries to mount)"
                )
            ids.append(None)  # no session_id: the actor's session-less entries
        elif not isinstance(value, str) or not value.strip() or value != value.strip():
            problems.append(f"{where}: {name} must be a non-empty string, not {value!r}")
            ids.append(None)
        else:
            ids.append(value)
    return DATABRICKS, ids[0], ids[1]


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


# ---------------------------------------------------------------------------------------------
# The stores, as the API knows them


@dataclass(frozen=True)
class MountPlan:
    """Where and how one attached store is mounted."""

    attachment: Attachment
    store: MemoryStore
    path: Path

    @property
    def slug(self) -> str:
        return self.path.name

    @property
    def read_only(self) -> bool:
        return self.attachment.read_only

    @property
    def described(self) -> str:
        """The store in a message: its id and name, or a Databricks store's actor and session."""
        if self.attachment.databricks:
            return self.attachment.described
        return f"{self.store.id} ({self.store.name!r})"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "memory_store_id": self.store.id,
            "name": self.store.name,
            "path": str(self.path),
            "access": self.attachment.access,
        }
        if self.attachment.databricks:
            found.update(
                api=DATABRICKS,
                actor_id=self.attachment.actor_id,
                session_id=self.attachment.session_id,
            )
        return found


def check_stores(attachments: list[Attachment], stores: dict[str, MemoryStore | None]) -> list[str]:
    """Problems with the stores themselves: unknown, archived but attached read-write."""
    problems = []
    for attachment in attachments:
        store = stores.get(attachment.store_key)
        where = f"resources[{attachment.index}]"
        if store is None:
            kind = "Databricks store" if attachment.databricks else "memory store"
            problems.append(f"{where}: {kind} {attachment.memory_store_id} does not exist")
        elif store.archived and not attachment.read_only:
            problems.append(
                f"{where}: memory store {store.id} ({store.name!r}) is archived and cannot be "
                "attached read_write; attach it read_only"
            )
    return problems


def plan_mounts(
    attachments: list[Attachment], stores: dict[str, MemoryStore | None], root: Path
) -> list[MountPlan]:
    """Check the stores and the root, and say where each store goes.

    A Memory Stores store goes at the slug of its name; a Databricks store at its id, or, when
    it is attached more than once (for other actors or sessions), at the slug of its id, actor
    and session (``notes-agent-7-s1``). Raises SessionError with every problem found. Nothing
    is created or mounted here: the root is the one mount point, the stores' directories are
    the mount's own.
    """
    problems = check_stores(attachments, stores)
    if problems:
        raise SessionError(problems)
    plans: list[MountPlan] = []
    by_slug: dict[str, MountPlan] = {}
    attached = [a.store_key for a in attachments]
    for attachment in attachments:
        store = stores[attachment.store_key]
        assert store is not None  # check_stores refused unknown stores
        name_slug = slug(store.name)
        if attachment.databricks and attached.count(attachment.store_key) > 1:
            name_slug = slug(
                "-".join(filter(None, (store.id, attachment.actor_id, attachment.session_id)))
            )
        if not name_slug:
            problems.append(
                f"memory store {store.id} is named {store.name!r}, which gives an empty "
                "directory name; rename the store"
            )
            continue
        plan = MountPlan(attachment=attachment, store=store, path=root / name_slug)
        other = by_slug.get(name_slug)
        if other is not None:
            problems.append(
                f"memory stores {other.described} and {plan.described} would both mount at "
                f"{plan.path}; rename one of them"
            )
            continue
        by_slug[name_slug] = plan
        plans.append(plan)
    problems.extend(check_root(root))
    if problems:
        raise SessionError(problems)
    return plans


def check_root(root: Path) -> list[str]:
    """The session root is the mount point: it must not exist yet (the session creates it and
    removes it at the end), or be an empty directory (kept at the end), never a symbolic link
    (the mount would cover wherever it points: one planted by another user could point at any
    empty directory of the machine), nor a mount already."""
    if root.is_symlink():
        return [
            f"session root {root} is a symbolic link; remove it (memfs never mounts through one)"
        ]
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return [f"session root {root} exists and is not a directory"]
    except OSError as exc:
        if exc.errno in (errno.ENOTCONN, errno.ECONNABORTED):
            return [f"session root {root} is a dead mount; unmount it (fusermount3 -uz {root})"]
        return [f"session root {root} is unusable: {exc.strerror}"]
    if os.path.ismount(root):
        return [f"session root {root} is already a mount point"]
    if entries:
        return [f"session root {root} exists and is not empty ({len(entries)} entries)"]
    if not os.access(root, os.W_OK | os.X_OK):
        return [f"session root {root} is not writable"]
    return []


# ---------------------------------------------------------------------------------------------
# Session ids


def new_session_id() -> str:
    """``sesn_`` and 24 random base62 characters (about 143 bits)."""
    return SESSION_ID_PREFIX + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it can travel in a header, else raise SessionError."""
    if not _SESSION_ID.fullmatch(session_id):
        raise SessionError([f"session id {session_id!r} must be 1-128 letters, digits, '_' or '-'"])
    return session_id


# ---------------------------------------------------------------------------------------------
# The state file: how `memfs session stop` and `status` find a running session


def state_dir() -> Path:
    """Where state files live: $MEMFS_STATE_DIR, else /run/memfs as root, else per user."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    if os.geteuid() == 0:
        return Path("/run/memfs")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "memfs"
    return Path(f"/tmp/memfs-{os.geteuid()}")


def state_path(root: Path) -> Path:
    """The state file of the session at ``root`` (kept outside the root, away from agents)."""
    absolute = Path(os.path.abspath(root))
    digest = hashlib.sha256(str(absolute).encode("utf-8")).hexdigest()[:16]
    return state_dir() / f"session-{slug(absolute.name) or 'root'}-{digest}.json"


@dataclass
class SessionState:
    """What a running (or finished) session tells ``memfs session stop`` and ``status``; ``pid``
    is the process that serves every store (``memfs.session.runner``)."""

    pid: int
    root: str
    session_id: str
    status: str  # "starting", "running", "stopping", "stopped"
    mounts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # what its stop tells that is no problem: files open for writing then, and where they went
    notes: list[str] = field(default_factory=list)
    log_file: str | None = None
    created_root: bool = False  # the session made the root: removed when it ends

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "root": self.root,
            "session_id": self.session_id,
            "status": self.status,
            "mounts": self.mounts,
            "problems": self.problems,
            "notes": self.notes,
            "log_file": self.log_file,
            "created_root": self.created_root,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionState:
        return cls(
            pid=int(data["pid"]),
            root=str(data["root"]),
            session_id=str(data["session_id"]),
            status=str(data["status"]),
            mounts=list(data.get("mounts") or []),
            problems=[str(p) for p in data.get("problems") or []],
            notes=[str(n) for n in data.get("notes") or []],
            log_file=data.get("log_file"),
            created_root=bool(data.get("created_root")),
        )

    def write(self, path: Path) -> None:
        """Replace the state file atomically (readers never see half a file); ``OSError``
        (``memfs.host.private.NotPrivateError`` included) if it cannot."""
        data = (json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8")
        replace_file(path, data, "session state", create_mode=0o700)

    @classmethod
    def read(cls, path: Path) -> SessionState | None:
        """The state at ``path``, or None when there is none (or it is unreadable)."""
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable session state %s: %s", path, exc)
            return None


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists (zombies of our own children count as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True
