"""Durable write-back: what the journal's records mean for one mount, conflicts, and replay.

Owns the link between the write-back queue and the on-disk journal (``memfs.writeback.journal``):
- every time the queue records work for a key (``queued``), the state that work will upload is
  written to the journal *before* the operation that asked returns to the kernel (close, fsync,
  truncate, rename, unlink): for an inode its path, memory id, base sha and dirty content; for a
  deferred delete the memory id and expected sha; a state already on disk unchanged (the same
  generation of a file, committed by flush and again by release, or re-queued for a retry) is
  not written again: one record per commit;
- when the work is done (or cancelled: the change was superseded locally) the record is dropped;
  a permanent failure other than a conflict keeps it, so it is reported at unmount and retried
  by the next mount. The drop of work the server has is flushed with the next commit's record,
  or by ``DropFlusher`` within ``DROP_FLUSH_DELAY`` (one ``fdatasync`` a commit instead of two:
  a power cut before then replays a change the server has, which changes nothing); a cancel's
  drop is flushed before the operation that cancelled returns (a replay would undo it);
- a conflict (the memory changed on the server) keeps the remote head and saves the local
  content as a sibling memory ``<name>.conflict-<UTC time>[.<ext>]``, itself a queued, journaled
  create (``("conflict", n)`` keys), counted in ``conflicts``;
- a create of content that lives nowhere else (a conflict copy, a replayed new file) that the
  full store refuses becomes a new file of the mount (``waits_as_file``): visible and readable
  at its name while it waits for room, journaled as that file before the record it came from
  is dropped, and uploaded when room appears as any new file (``CoreState.waiting_for_room``);
- records left by an earlier daemon (``kill -9``, power cut, outage at unmount) are replayed as
  ``("replay", name)`` keys with their preconditions; a create whose answer was lost is
  recognised (same path, same content) and not repeated.

It must not decide POSIX semantics (``vfs``) nor touch FUSE. See docs/writeback.md.
"""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio

from memfs.contract import paths
from memfs.contract.errors import (
    ExistsError,
    NotFoundError,
    PathConflictError,
    PreconditionFailedError,
    RemoteConflictError,
    StoreFullError,
)
from memfs.contract.models import Memory, sha256_hex
from memfs.contract.store_api import StoreAPI
from memfs.core.fetch.cache import ContentCache, ListingCache
from memfs.core.fetch.orphans import hand_over
from memfs.core.model.inodes import Kind, Node
from memfs.core.model.state import CoreState
from memfs.core.ops.refusals import Refusals
from memfs.writeback.journal import Journal, Record
from memfs.writeback.queue import WriteBack

log = logging.getLogger(__name__)

MAX_CONFLICTS_KEPT = 50
# a drop left for the next flush is flushed at the latest this long after it (seconds): the
# window in which a power cut replays a change the server already has (and a change made on the
# server since turns that replay into a conflict copy)
DROP_FLUSH_DELAY = 0.5
Access = tuple[int | None, int | None, int | None]  # a file's mode, uid, gid (None: the mount's)
WAITING_FOR_ROOM = "waiting for room (the store is full)"  # why a create is not uploaded yet


def conflict_path(path: str, when: datetime | None = None, attempt: int = 0) -> str:
    """``/a/notes.md`` -> ``/a/notes.conflict-20261130T091500Z.md`` (``-2``, ... on retries);
    always a path the store takes, beside ``path`` or else in the root."""
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    if attempt:
        stamp += f"-{attempt + 1}"
    directory, name = paths.parent(path), paths.basename(path)
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    new = paths.join(directory, f"{stem}.conflict-{stamp}" + (f".{ext}" if ext else ""))
    if paths.is_valid_file_path(new):
        return new
    # a path outside the store's rules (an entry an older server stored): a name it takes
    tail = f".conflict-{stamp}" + (f".{_storable(ext)[:16]}" if ext else "")
    room = paths.MAX_NAME_BYTES - len(tail.encode()) - 4  # and "-N" of a retried name
    stem = _storable(stem).encode()[:room].decode("utf-8", "ignore") or "conflict"
    beside = paths.join(directory, stem + tail)
    return beside if paths.is_valid_file_path(beside) else "/" + stem + tail


def _storable(text: str) -> str:
    """``text`` in NFC, its control and format characters (and ``/``) as ``_``."""
    return "".join(
        "_" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or ch == "/" else ch
        for ch in unicodedata.normalize("NFC", text)
    )


@dataclass
class ConflictInfo:
    path: str
    memory_id: str | None
    saved_as: str
    at: str
    saved: bool = False
    # the losing file's mode, uid and gid (None: the mount's): its copy is as private
    access: Access = (None, None, None)


class Durable:
    """See the module docstring. ``journal`` None: nothing is written (tests of the core)."""

    def __init__(
        self,
        state: CoreState,
        *,
        writeback: WriteBack,
        upload_store: StoreAPI,
        listings: ListingCache,
        contents: ContentCache,
        refusals: Refusals,
        journal: Journal | None = None,
        untouched: int = 0,
        waits_as_file: Callable[[str, bytes, str | None], Node] | None = None,
        copy_created: Callable[[Memory, Access], None] | None = None,
    ) -> None:
        self.state = state  # the inode table and pending deletes the queue's keys stand for
        self.writeback = writeback
        self.upload_store = upload_store  # long deadlines: background uploads
        self.listings = listings
        self.contents = contents  # hand_over: the server's content of a move, if cached
        self.journal = journal
        self.life = f"{int(time.time() * 1000):x}"
        self.conflicts: list[ConflictInfo] = []
        self.conflict_count = 0
        self._conflict_saves: dict[int, tuple[str, bytes, ConflictInfo]] = {}
        self._next_conflict = 1
        self._replays: dict[str, Record] = {}
        # record name -> the state its record on disk holds (``_state``); an entry exists only
        # while that record is on disk, so an unchanged state is never journaled twice
        self._journaled: dict[str, tuple[Any, ...]] = {}
        # record name -> (path, why): reports name files by path, records by name
        self.failed: dict[str, tuple[str, str]] = {}  # permanent failure: kept in the journal
        self.retrying: dict[str, tuple[str, str]] = {}  # last transient error (retried)
        self.replayed = 0
        # read-only mount: records of an earlier mount left in the journal
        self.untouched = untouched
        self.refusals = refusals  # files refused (EFBIG, EILSEQ): kept, never uploaded
        # makes (path, content, description) a new file of the mount, queued (None: such a
        # create waits for room in the journal only, unseen: tests of the queue alone)
        self.waits_as_file = waits_as_file
        # shows a conflict copy just created with the mode and owner of its file (None: as
        # listed, the mount's; tests of the queue alone)
        self.copy_created = copy_created
        # conflict copies waiting for room as files, by inode: saved once that file is created
        self._copies_waiting: dict[int, ConflictInfo] = {}
        self.flusher = DropFlusher(journal)

    # -- names --------------------------------------------------------------------------------

    def name_of(self, key: Hashable) -> str:
        if isinstance(key, int):
            return f"{self.life}-n{key}"
        assert isinstance(key, tuple)
        kind, value = key[0], key[1]
        if kind == "replay":
            return str(value)
        return f"{self.life}-{kind[0]}-{value}"

    def path_of(self, key: Hashable) -> str | None:
        """The path a key of the queue uploads to (for reports), if it has one."""
        if isinstance(key, int):
            node = self.state.table.get(key)
            return node.path if node is not None else None
        assert isinstance(key, tuple)
        if key[0] == "conflict":
            saved = self._conflict_saves.get(int(key[1]))
            return saved[0] if saved is not None else None
        if key[0] == "replay":
            record = self._replays.get(str(key[1]))
            return record.path if record is not None else None
        if key[0] == "delete":
            pending = self.state.pending_deletes.get(str(key[1]))
            return f"delete {pending.remote_path or pending.local_path}" if pending else None
        return None

    # -- hooks of the write-back queue --------------------------------------------------------

    def queued(self, key: Hashable) -> None:
        if self.journal is None:
            return
        record = self._record(key)
        if record is None:
            return
        state = self._state(key, record)
        if self._journaled.get(record.name) == state:
            return  # already on disk as it is (docs/writeback.md, "Costs")
        self.journal.put(record)
        self._journaled[record.name] = state

    def done(self, key: Hashable, error: BaseException | None) -> None:
        if error is None and isinstance(key, int) and key in self._copies_waiting:
            info = self._copies_waiting.pop(key)  # created, or removed before it could be
            node = self.state.table.get(key)
            if node is not None and node.memory_id is not None:
                info.saved, info.saved_as = True, node.remote_path or info.saved_as
        if self.journal is None:
            return
        name = self.name_of(key)
        self.retrying.pop(name, None)
        if error is None or isinstance(
            error, PreconditionFailedError | PathConflictError | RemoteConflictError
        ):
            self.failed.pop(name, None)
            self._journaled.pop(name, None)
            self.journal.drop(name, flush=False)  # the server has it (a cancel: ``cancelled``)
            self.flusher.soon()
        elif isinstance(error, StoreFullError):  # kept, and queued again when room appears
            self.failed[name] = (self.describe(key), WAITING_FOR_ROOM)
        else:
            self.failed[name] = (self.describe(key), f"{type(error).__name__}: {error}")

    def cancelled(self, key: Hashable) -> None:
        """The queue forgot the work of ``key`` (after ``done``): the change was superseded
        here, and a replay of its record would undo that, so the drop is flushed now."""
        if self.journal is not None:
            self.journal.flush()

    def retry(self, key: Hashable, error: BaseException) -> None:
        """A transient failure (server unreachable, 5xx, 429): remember it for the report."""
        self.retrying[self.name_of(key)] = (self.describe(key), f"{type(error).__name__}: {error}")

    def describe(self, key: Hashable) -> str:
        """What a person calls the change of ``key``: its path, else its record name."""
        return self.path_of(key) or self.name_of(key)

    def _state(self, key: Hashable, record: Record) -> tuple[Any, ...]:
        """What makes two records of ``key`` the same: the header, and the content's identity
        (a file's generation, bumped by every change of its data; else the bytes themselves)."""
        header = record.header()
        header.pop("written_at")
        node = self.state.table.get(key) if isinstance(key, int) else None
        return (header, node.gen) if node is not None else (header, record.data)

    def _record(self, key: Hashable) -> Record | None:
        name = self.name_of(key)
        if isinstance(key, int):
            node = self.state.table.get(key)
            if node is None or node.kind is not Kind.FILE or node.local_only or node.path is None:
                return None
            data = None
            if node.refused is not None:
                # refused content is never journaled, so never replayed (memfs.core.ops.refusals): a
                # new file is not created, a memory only moves
                if node.memory_id is None:
                    return None
            elif node.data is not None and (node.dirty or node.memory_id is None):
                data = bytes(node.data)
            elif node.memory_id is None:
                data = b""
            return Record(
                name=name,
                op="put",
                path=self.state.store_path(node),  # a clash's file: the memory's own path
                memory_id=node.memory_id,
                remote_path=node.remote_path,
                base_sha=node.base_sha,
                data=data,
                description=node.new_description,
            )
        assert isinstance(key, tuple)
        if key[0] == "delete":
            pending = self.state.pending_deletes.get(str(key[1]))
            if pending is None:
                return None
            return Record(
                name=name,
                op="delete",
                memory_id=pending.memory_id,
                remote_path=pending.remote_path,
                base_sha=pending.expected_sha,
            )
        if key[0] == "conflict":
            saved = self._conflict_saves.get(int(key[1]))
            if saved is None:
                return None
            return Record(name=name, op="conflict", path=saved[0], data=saved[1])
        return None  # replays: the record is already on disk

    # -- conflicts ----------------------------------------------------------------------------

    def save_conflict(self, path: str, memory_id: str | None, data: bytes | None) -> None:
        """Keep the local side of a conflict as a sibling memory (queued, journaled)."""
        self.conflict_count += 1
        sibling = conflict_path(path)
        info = ConflictInfo(
            path=path, memory_id=memory_id, saved_as=sibling, at=datetime.now(UTC).isoformat()
        )
        loser = self.state.table.by_path.get(path)
        if loser is not None and loser.kind is Kind.FILE:
            info.access = (loser.mode, loser.uid, loser.gid)
        self.conflicts.append(info)
        del self.conflicts[:-MAX_CONFLICTS_KEPT]
        if data is None:
            info.saved_as = ""
            return
        number = self._next_conflict
        self._next_conflict += 1
        self._conflict_saves[number] = (sibling, data, info)
        log.error(
            "CONFLICT: %s (%s) changed on the server; the server's version stays, the local "
            "content is saved as %s",
            path,
            memory_id,
            sibling,
        )
        self.writeback.schedule(("conflict", number), 0)

    async def _create_sibling(
        self, path: str, data: bytes, access: Access = (None, None, None)
    ) -> tuple[str, Node | None]:
        """Create the conflict copy ``path`` (or a numbered name if that one is taken), shown
        with ``access``, the mode and owner of its file; returns the name it got and, if the
        store is full, the file of the mount it waits as."""
        text = data.decode("utf-8")
        for attempt in range(20):
            target = path if attempt == 0 else _numbered(path, attempt)
            local = self.state.table.by_path.get(target)
            if local is not None and local.memory_id is None:
                continue  # a file of this mount not on the server has it (a copy waiting)
            try:
                memory = await self.upload_store.create(target, text)
                self.listings.drop(paths.parent(target))
                if self.copy_created is not None:
                    self.copy_created(memory, access)
                return target, None
            except PathConflictError as exc:
                if await self._is_same(exc, target, text):
                    return target, None
            except StoreFullError:
                if self.waits_as_file is None:
                    raise
                if target in self.state.table.by_path:
                    continue  # taken here while the create was asked (another copy): the next
                # the store checks the path before the room: ``target`` is free there
                waiting = self.waits_as_file(target, data, None)
                waiting.mode, waiting.uid, waiting.gid = access
                return target, waiting
        # not a PathConflictError: that would count as a conflict already kept (``done`` drops
        # the record), and this content exists nowhere else. Its record stays and is reported.
        raise ExistsError(f"no free name for the conflict copy of {path}: kept in the journal")

    async def _is_same(self, exc: PathConflictError, path: str, text: str) -> bool:
        """True if the memory at ``path`` already holds ``text`` (an earlier attempt made it)."""
        return await self.created_earlier(exc, path, text) is not None

    async def created_earlier(self, exc: PathConflictError, path: str, text: str) -> Memory | None:
        """The memory at ``path`` if it holds exactly ``text``: an earlier create of ours whose
        answer was lost (a retry of the queue, or a replay after a crash), not a conflict."""
        memory_id = getattr(exc, "conflicting_memory_id", None)
        try:
            if memory_id:
                memory = await self.upload_store.read(memory_id, with_content=False)
            else:
                found = await self.upload_store.find(path)
                if found is None:
                    return None
                memory = found
        except NotFoundError:
            return None
        if memory.path == path and memory.content_sha256 == sha256_hex(text):
            return memory
        return None

    # -- work of the queue for our own keys ---------------------------------------------------

    async def run(self, key: tuple[Any, ...]) -> None:
        if key[0] == "conflict":
            saved = self._conflict_saves.get(int(key[1]))
            if saved is None:
                return
            sibling, data, info = saved
            info.saved_as, waiting = await self._create_sibling(sibling, data, info.access)
            if waiting is None:
                info.saved = True
            else:
                self._copies_waiting[waiting.ino] = info
            del self._conflict_saves[int(key[1])]
            return
        if key[0] == "replay":
            record = self._replays.get(str(key[1]))
            if record is not None:
                await self._replay(record)
                self._replays.pop(record.name, None)
                self.replayed += 1

    # -- replay of an earlier daemon's records ------------------------------------------------

    def load(self) -> int:
        """Queue every record left in the journal; return how many."""
        if self.journal is None:
            return 0
        records = self.journal.load()
        for record in records:
            self._replays[record.name] = record
            log.info(
                "replaying journal record %s: %s %s", record.name, record.op, record.path or ""
            )
            self.writeback.schedule(("replay", record.name), 0)
        return len(records)

    async def _replay(self, record: Record) -> None:
        store = self.upload_store
        if record.op == "delete":
            assert record.memory_id is not None
            try:
                await store.delete(record.memory_id, expected_sha256=record.base_sha)
            except NotFoundError:
                pass
            except PreconditionFailedError:
                log.warning(
                    "%s (%s) changed on the server after it was removed here: not deleted",
                    record.remote_path,
                    record.memory_id,
                )
            return
        if record.op == "conflict":
            assert record.path is not None and record.data is not None
            await self._create_sibling(record.path, record.data)
            return
        assert record.path is not None
        text = record.data.decode("utf-8") if record.data is not None else None
        described = {} if record.description is None else {"description": record.description}
        if record.memory_id is None:
            await self._replay_create(record)
            return
        content = text if text is not None and sha256_hex(text) != record.base_sha else None
        new_path = record.path if record.path != record.remote_path else None
        if content is None and new_path is None and record.description is None:
            return
        if content is not None and record.base_sha is None:
            # no base to check against (a record of an older memfs, written after a conflict):
            # never replace the head blindly, keep the content as a conflict copy
            self.save_conflict(record.path, record.memory_id, record.data)
            return
        try:
            await store.update(
                record.memory_id,
                content=content,
                path=new_path,
                expected_sha256=record.base_sha if content is not None else None,
                **described,
            )
        except PreconditionFailedError:
            self.save_conflict(record.path, record.memory_id, record.data)
        except NotFoundError:
            if record.data is not None:  # deleted on the server: the local content lives on
                await self._replay_create(record)
        except PathConflictError:
            if content is None:
                log.warning(
                    "move of %s to %s not replayed: the path is taken",
                    record.memory_id,
                    record.path,
                )
                return
            self.save_conflict(record.path, record.memory_id, record.data)

    async def _replay_create(self, record: Record) -> None:
        """Create the memory of a record (a new file, or one deleted on the server since):
        another memory at its path makes it a conflict copy; a full store, a new file of the
        mount that waits for room (a file of this mount at that path: a conflict copy)."""
        assert record.path is not None
        text = record.data.decode("utf-8") if record.data is not None else ""
        described = {} if record.description is None else {"description": record.description}
        try:
            await self.upload_store.create(record.path, text, **described)
        except PathConflictError as exc:
            if not await self._is_same(exc, record.path, text):
                self.save_conflict(record.path, None, record.data)
        except StoreFullError:
            if self.waits_as_file is None:
                raise
            data = record.data or b""
            local = self.state.table.by_path.get(record.path)
            if local is None:
                self.waits_as_file(record.path, data, record.description)
            elif local.data is None or bytes(local.data) != data:  # made here since
                self.save_conflict(record.path, None, data)
            # else: the same content waits already (two records of one file after a crash)

    # -- the store is gone ---------------------------------------------------------------------

    def hand_over(self) -> tuple[Path, list[str]] | None:
        """The store was deleted: write the content of every journal record as a plain file
        (``memfs.core.fetch.orphans``) and drop the records, so that no mount ever replays them.
        Returns the directory and one line per record (None: no journal)."""
        if self.journal is None:
            return None
        records = self.journal.load()
        if not records:
            return None
        items: list[tuple[str, bytes | None]] = []
        lines: list[str] = []
        for record in records:
            if record.op == "delete":
                lines.append(f"delete of {record.remote_path or record.memory_id}: not done")
            elif record.path is not None:
                # a move without new content: the content is the server's, if still cached
                data = (
                    record.data if record.data is not None else self.contents.get(record.base_sha)
                )
                items.append((record.path, data))
        directory, written = hand_over(self.journal.directory.parent, items)
        for record in records:
            self.journal.drop(record.name, flush=False)
            self._journaled.pop(record.name, None)
            self.failed.pop(record.name, None)
            self.retrying.pop(record.name, None)
        self.journal.flush()  # once for all of them
        return directory, written + lines

    # -- reporting ----------------------------------------------------------------------------

    def not_uploaded(self) -> list[dict[str, str | None]]:
        """One entry per journal record still on disk (the unmount report; refused files are
        reported apart: ``refusals.report``): op, path, why (the error of its last attempt, the
        one ``memfs status`` shows), and the journal directory that keeps it (None: none)."""
        kept_in = str(self.journal.directory) if self.journal is not None else None
        entries: list[dict[str, str | None]] = []
        records = self.journal.load() if self.journal is not None else []
        for record in records:
            known = self.failed.get(record.name) or self.retrying.get(record.name)
            entries.append(
                {
                    "op": record.op,
                    "path": record.path or record.remote_path or record.memory_id or "?",
                    "why": known[1] if known is not None else "not uploaded yet",
                    "kept_in": kept_in,
                }
            )
        return entries


class DropFlusher:
    """Flushes the journal's drops left for the next flush (``Durable.done``) within
    ``DROP_FLUSH_DELAY`` of the first of them, when no commit's flush came first; one
    ``fdatasync`` for all of them."""

    def __init__(self, journal: Journal | None) -> None:
        self.journal = journal
        self._due = trio.Event()

    def soon(self) -> None:
        self._due.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._due.wait()
            await trio.sleep(DROP_FLUSH_DELAY)
            self._due = trio.Event()
            if self.journal is None:
                continue
            try:
                self.journal.flush()
            except OSError as exc:  # the drops stay written: a power cut replays them, harmless
                log.warning("journal drops not flushed: %s", exc)


def _numbered(path: str, attempt: int) -> str:
    stem, dot, ext = path.rpartition(".")
    if not dot or "/" in ext:
        return f"{path}-{attempt + 1}"
    return f"{stem}-{attempt + 1}.{ext}"
