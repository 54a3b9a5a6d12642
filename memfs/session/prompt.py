"""The text an agent needs about its session's mounts: ``render_prompt``.

Markdown for a system prompt: what is mounted where, read-only or not, which API each store is
(a Memory Stores store keeps every version under ``.versions/``; a Databricks store is one
actor's entries, their descriptions the ``user.description`` attribute), how to search, and
that every other name at the session's root is local scratch (never uploaded, lost at the end
of the session; ``mv`` into or out of a store copies). Descriptions and instructions are the
store owner's words, passed through unchanged.
"""

from __future__ import annotations

from pathlib import Path

from memfs.contract.store_brief import access, one_paragraph, persistence
from memfs.session.plan import MountPlan


def render_prompt(plans: list[MountPlan], root: Path, *, synced: bool = False) -> str:
    """Markdown for an agent's system prompt: what is mounted where under ``root``, and how to
    use it; ``synced``: the stores are directories kept in step (``memfs.session.synced``), not
    mounts."""
    if synced:
        return _synced_prompt(plans, root)
    count = len(plans)
    noun = "memory store" if count == 1 else "memory stores"
    lines = [
        "# Memory",
        "",
        f"You have {count} {noun} mounted as {'a directory' if count == 1 else 'directories'}. "
        + persistence(f"The files in {'it' if count == 1 else 'them'}"),
        "",
        "Use ordinary file tools and shell commands (`ls`, `cat`, `grep`, editors). Each file "
        "is UTF-8 text of at most 100 KB. A change is saved to the store when the file is "
        'closed; a read-only store refuses every change with "Read-only file system".',
        "",
        "To search a store by words, read `<path>/.search/<words>` "
        '(`cat <path>/.search/"tomato sauce"`): the matching files, best first, one a line, '
        "each path first. `.search` is never listed and cannot be written.",
        "",
        f"The {noun} {'is the directory' if count == 1 else 'are the directories'} under "
        f"`{root}` listed below. Any other name you create in `{root}` itself is local "
        "scratch: never uploaded, lost when the session ends. Moving a file between scratch "
        "and a store, or between two stores, copies it (`mv` copies, then removes the "
        "original).",
    ]
    return "\n".join(lines + _stores(plans, synced=False)) + "\n"


def _synced_prompt(plans: list[MountPlan], root: Path) -> str:
    count = len(plans)
    noun = "memory store" if count == 1 else "memory stores"
    lines = [
        "# Memory",
        "",
        f"You have {count} {noun} as {'a directory' if count == 1 else 'directories'} of "
        "ordinary files: copies kept in step with the store both ways, within about a second. "
        + persistence(f"The files in {'it' if count == 1 else 'them'}"),
        "",
        "Use ordinary file tools and shell commands (`ls`, `cat`, `grep`, editors). Each file "
        "is UTF-8 text of at most 100 KB. A change is saved to the store a moment after the "
        "file is written; a file changed in the store meanwhile keeps the store's version, and "
        "your text is saved beside it as `NAME.conflict-<time>.md`. A file the store refuses "
        "(not UTF-8, too large) stays here, unsaved. In a read-only store the files have no "
        "write permission, and a change is undone.",
        "",
        f"The {noun} {'is the directory' if count == 1 else 'are the directories'} under "
        f"`{root}` listed below. Any other name you create in `{root}` itself is never "
        "uploaded.",
    ]
    return "\n".join(lines + _stores(plans, synced=True)) + "\n"


def _stores(plans: list[MountPlan], *, synced: bool) -> list[str]:
    lines: list[str] = []
    for plan in plans:
        store = plan.store
        lines += ["", f"## {store.name}", "", f"- Path: `{plan.path}`"]
        lines.append(f"- Access: {access(plan.read_only)}")
        lines.append(f"- Kind: {_synced_kind(plan) if synced else _kind(plan)}")
        if store.description.strip():
            lines.append(f"- Description: {one_paragraph(store.description)}")
        if plan.attachment.instructions.strip():
            lines += ["", "Instructions:", "", plan.attachment.instructions.strip()]
    return lines


def _synced_kind(plan: MountPlan) -> str:
    attachment = plan.attachment
    if not attachment.databricks:
        return "Memory Stores store (every change is kept as a version in the store)"
    session = f", session {attachment.session_id}" if attachment.session_id else ""
    return (
        f"Databricks Agent Memory store (the entries of actor {attachment.actor_id}{session}); "
        "the files' descriptions are in `.memfs/descriptions.json` (`{path: text}`), which you "
        "may edit"
    )


def _kind(plan: MountPlan) -> str:
    attachment = plan.attachment
    if not attachment.databricks:
        return (
            "Memory Stores store; every change of a file is kept as a version under "
            "`.versions/` (read-only, reachable by name, never listed)"
        )
    session = f", session {attachment.session_id}" if attachment.session_id else ""
    return (
        f"Databricks Agent Memory store (the entries of actor {attachment.actor_id}{session}); "
        "a file's description is its `user.description` extended attribute "
        "(`getfattr -n user.description FILE`, `setfattr -n user.description -v TEXT FILE`); "
        "no `.versions/`"
    )
