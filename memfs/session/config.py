"""A session's config: the resources it attaches, checked before anything else happens.

A session attaches up to eight stores in the platform's own resource shape (a JSON list, or an
object with ``resources``, of ``{"type": "memory_store", "memory_store_id", "access",
"instructions"}``, where a Memory Stores store's ``memory_store_id`` may be its name, resolved
at start by ``memfs.session.stores``, and optionally an ``owner`` of every store's files:
``{"uid", "gid", "umask"}``). A Databricks Agent Memory store is the same resource with
``"api": "databricks"``, an ``actor_id`` and optionally a ``session_id`` (whose entries are
served).

Owns parsing and checking the config (``load_config``, ``parse_config``); every problem found is
one line for a person, all raised together (``SessionError``). Reads one file, nothing else:
the stores themselves are checked by ``memfs.session.plan``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memfs.api.config import ConfigError
from memfs.contract.exit_codes import EXIT_USAGE
from memfs.mount.owner import Owner, parse_gid, parse_uid, parse_umask

MAX_STORES = 8
MAX_INSTRUCTIONS = 4096  # characters, as the platform counts them


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
    """The session cannot start; ``problems`` holds one line per reason, meant for a person;
    ``code``, the exit status: that of their kind of fault when they share one (a refused key
    5, unknown stores 3: ``memfs.contract.exit_codes``), else 2."""

    def __init__(self, problems: list[str], code: int = EXIT_USAGE) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.code = code

    @classmethod
    def of_kinds(cls, problems: list[tuple[str, int]]) -> SessionError:
        """One error for ``problems``, each (line, exit status of its kind)."""
        codes = {code for _, code in problems}
        code = codes.pop() if len(codes) == 1 else EXIT_USAGE
        return cls(list(dict.fromkeys(line for line, _ in problems)), code)


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
        """Its key in ``fetch_stores``' answers (the APIs' ids may coincide; "/" is in neither)."""
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
