"""A store's history written straight through the server's storage layer (no HTTP spent on it,
before the server starts), for the versions and export cases: the memories and their contents."""

from __future__ import annotations

from memfs.contract.models import Actor, Memory
from memfs.server.backends.sqlite import SqliteStorage

ACTOR = Actor("api_actor", "apikey_bench")


def content_of(memory: int, version: int) -> str:
    return f"memory {memory}, version {version}\n" + "lorem ipsum dolor sit amet. " * 8


async def create_memories(storage: SqliteStorage, store_id: str, count: int) -> list[Memory]:
    """``count`` memories, version 0 of each, in 20 directories."""
    made = []
    for i in range(count):
        memory = await storage.create_memory(
            store_id, path=f"/dir{i % 20:02d}/note{i:05d}.md", content=content_of(i, 0),
            actor=ACTOR,
        )  # fmt: skip
        made.append(memory)
    return made
