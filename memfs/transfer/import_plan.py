"""What ``memfs import`` will do: the tree read from DIR compared with the store's listing.

One step per memory path, in path order: ``create`` (not in the store), ``update`` (its content
differs, or on a store with descriptions its description), ``skip`` (equal), ``delete`` (only
with ``--delete``: in the store, absent from DIR), ``refuse`` (cannot be a memory, with the
reason) and ``keep`` (with ``--delete``: a memory no tree can hold, a reserved or unsafe path,
or one below a directory of DIR that was not read: left in the store). Updates and deletes
carry the hash of the content listed: the writes are made with it as their precondition, so a
memory written by someone else after the listing is reported, never overwritten.

The store's memory limit is applied here, deterministically: the store's current number, less
the deletes, plus the creates in path order; the creates past the limit are refused ("store
full"), whatever order the uploads finish in.

Pure: no store and no file system (``memfs.transfer.import_walk`` read the tree, the caller
listed the store); ``--dry-run`` prints this plan and stops.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from memfs.contract.models import Memory
from memfs.contract.store_api import Capabilities
from memfs.transfer import layout
from memfs.transfer.import_walk import Refusal, Tree, TreeFile

log = logging.getLogger(__name__)

Action = Literal["create", "update", "skip", "delete", "refuse", "keep"]


@dataclass(frozen=True)
class Step:
    """One thing to do at ``path``. ``file``: the file to upload (create, update);
    ``memory``: the memory as listed (update, skip, delete, keep); ``description``: the one to
    set (None: leave it as it is)."""

    action: Action
    path: str
    reason: str = ""
    file: TreeFile | None = None
    memory: Memory | None = None
    description: str | None = None


@dataclass
class Plan:
    """Every step in path order, and notes for the person (one line each)."""

    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def count(self, action: Action) -> int:
        return sum(1 for step in self.steps if step.action == action)


def make_plan(
    tree: Tree, listed: list[Memory], capabilities: Capabilities, *, delete: bool = False
) -> Plan:
    """Compare ``tree`` with ``listed`` (every memory of the store, without content)."""
    plan = Plan()
    in_store = {memory.path: memory for memory in listed}
    descriptions = _descriptions(tree, capabilities, plan)
    creates: list[Step] = []
    steps = [_refuse(refusal) for refusal in tree.refused]
    for file in sorted(tree.files, key=lambda f: f.path):  # the creates in path order
        step = _step_of(file, in_store.get(file.path), descriptions, capabilities)
        (creates if step.action == "create" else steps).append(step)
    if delete:
        present = {file.path for file in tree.files}
        unknown = tuple(r.name for r in tree.refused)  # a refused directory: all below it
        steps += [
            _deletion(memory, _below_any(memory.path, unknown))
            for memory in listed
            if memory.path not in present
        ]
    room = _room(capabilities, len(listed) - sum(1 for s in steps if s.action == "delete"))
    for index, step in enumerate(creates):
        if room is not None and index >= room:
            limit = capabilities.max_memories
            step = _refuse(Refusal(step.path, f"the store is full ({limit} memories at most)"))
        steps.append(step)
    plan.steps = sorted(steps, key=lambda s: s.path)
    return plan


def _below_any(path: str, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that is ``path`` or a directory above it, or None."""
    return next((n for n in names if path == n or path.startswith(n + "/")), None)


def _room(capabilities: Capabilities, remaining: int) -> int | None:
    if capabilities.max_memories is None:
        return None
    return max(0, capabilities.max_memories - remaining)


def _refuse(refusal: Refusal) -> Step:
    return Step("refuse", refusal.name, refusal.reason)


def _step_of(
    file: TreeFile,
    memory: Memory | None,
    descriptions: dict[str, str] | None,
    capabilities: Capabilities,
) -> Step:
    description = None if descriptions is None else descriptions.get(file.path, "")
    if description is not None:
        problem = _description_problem(description, capabilities)
        if problem is not None:
            return _refuse(Refusal(file.path, problem))
    if memory is None:
        return Step("create", file.path, file=file, description=description or None)
    if description == (memory.description or ""):
        description = None  # nothing to change
    if memory.content_sha256 != file.sha256 or description is not None:
        return Step("update", file.path, file=file, memory=memory, description=description)
    return Step("skip", file.path, file=file, memory=memory)


def _description_problem(description: str, capabilities: Capabilities) -> str | None:
    size = len(description.encode("utf-8"))
    if size > capabilities.max_description_bytes:
        return (
            f"its description is {size} bytes, over the store's limit of "
            f"{capabilities.max_description_bytes}"
        )
    for character in capabilities.refused_characters:
        if character in description:
            return f"its description contains U+{ord(character):04X}, which the store refuses"
    return None


def _deletion(memory: Memory, unread: str | None) -> Step:
    """A memory absent from DIR: deleted, unless DIR's lacking it says nothing: it is below
    ``unread`` (a directory not read, a link), or no tree could hold it. Those stay."""
    if unread is not None:
        return Step("keep", memory.path, f"{unread} was not read", memory=memory)
    try:
        layout.file_path(memory.path)
    except layout.UnsafePathError as exc:
        return Step("keep", memory.path, f"no tree can hold it ({exc})", memory=memory)
    return Step("delete", memory.path, memory=memory)


def _descriptions(tree: Tree, capabilities: Capabilities, plan: Plan) -> dict[str, str] | None:
    """The descriptions to set, or None to leave them; a note when the store has none."""
    if tree.descriptions is None:
        return None
    if capabilities.descriptions:
        return tree.descriptions
    described = sum(1 for text in tree.descriptions.values() if text)
    if described:
        plan.notes.append(
            f"{described} description(s) of {layout.META_DIR}/{layout.DESCRIPTIONS_FILE} not "
            "imported: this store's memories have no descriptions"
        )
    return None
