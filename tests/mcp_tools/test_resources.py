"""Each memory as an MCP resource, the resource template and the store's prompt, through the
official client in process on a store of the session's server (both APIs): hostile paths
percent-encoded and read back, URIs in any other spelling refused, pages that neither skip nor
repeat, the prompt's name, description and access."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from kit.databricks import Workspace
from memfs.api import StoreClient
from memfs.mcp import resources
from memfs.mcp.app import RESOURCE_NOT_FOUND

from .conftest import connected

HOSTILE = {
    "/notes/a.md": "# a\n",
    "/odd/what? #1 100%.txt": "query, fragment and percent\n",
    "/ünï/çödé.markdown": "non-ASCII\n",
    "/a b/c+d&e=f;g,h@i.txt": "sub-delimiters\n",
    "/dots/..x/.hidden": "dots in names\n",
}


def test_uris_are_percent_encoded_and_read_back() -> None:
    assert resources.uri_of("/odd/what? #1 100%.txt") == (
        "memfs://memories/odd/what%3F%20%231%20100%25.txt"
    )
    assert resources.uri_of("/ünï/x.md") == "memfs://memories/%C3%BCn%C3%AF/x.md"
    for path in HOSTILE:
        assert resources.path_of(resources.uri_of(path)) == path


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/passwd",
        "memfs://memories",
        "memfs://memories/",
        "memfs://memories/../etc/passwd",
        "memfs://memories/notes/../../x.md",
        "memfs://memories/a%2Fb.md",  # a '/' that would split a name
        "memfs://memories/notes/%61.md",  # a second spelling of /notes/a.md
        "memfs://memories/notes/a.md?x=1",
        "memfs://memories/notes/a.md#top",
        "memfs://memories/%FF.md",  # not UTF-8
        "memfs://memories/a%00b.md",  # a control character
        "memfs://memories//a.md",
        "memfs://other/notes/a.md",
    ],
)
def test_other_spellings_are_refused(uri: str) -> None:
    with pytest.raises(resources.ResourceError):
        resources.path_of(uri)


async def test_memories_are_resources(client: StoreClient, ms_store: str, open_ms: Any) -> None:
    for path, content in HOSTILE.items():
        await client.create_memory(ms_store, path, content)
    async with open_ms() as backend, connected(backend) as tools:
        listed = await tools.client.list_resources()
        assert listed.next_cursor is None
        by_uri = {r.uri: r for r in listed.resources}
        assert set(by_uri) == {resources.uri_of(path) for path in HOSTILE}
        for path, content in HOSTILE.items():
            resource = by_uri[resources.uri_of(path)]
            assert resource.name == path
            assert resource.size == len(content.encode())
            markdown = path.endswith((".md", ".markdown"))
            assert resource.mime_type == ("text/markdown" if markdown else "text/plain")
            read = await tools.client.read_resource(resource.uri)
            assert [(c.uri, c.mime_type, c.text) for c in read.contents] == [  # type: ignore[union-attr]
                (resource.uri, resource.mime_type, content)
            ]
        templates = await tools.client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == [
            "memfs://memories{/path*}"
        ]

        with pytest.raises(MCPError) as missing:
            await tools.client.read_resource("memfs://memories/notes/none.md")
        assert missing.value.code == RESOURCE_NOT_FOUND
        for bad in ("memfs://memories/notes/../../etc/passwd", "file:///etc/passwd"):
            with pytest.raises(MCPError) as refused:
                await tools.client.read_resource(bad)
            assert refused.value.code == INVALID_PARAMS, bad
            assert "Not a memory's URI" in refused.value.error.message


async def test_pages_neither_skip_nor_repeat(
    client: StoreClient, ms_store: str, open_ms: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "PAGE_SIZE", 2)
    for name in "bdfhj":
        await client.create_memory(ms_store, f"/{name}.md", name)
    async with open_ms() as backend, connected(backend) as tools:
        first = await tools.client.list_resources()
        assert [r.name for r in first.resources] == ["/b.md", "/d.md"]
        assert first.next_cursor is not None
        # a memory created before the cursor and one after it, between two pages
        await client.create_memory(ms_store, "/a.md", "a")
        await client.create_memory(ms_store, "/e.md", "e")
        second = await tools.client.list_resources(cursor=first.next_cursor)
        assert [r.name for r in second.resources] == ["/e.md", "/f.md"]
        third = await tools.client.list_resources(cursor=second.next_cursor)
        assert [r.name for r in third.resources] == ["/h.md", "/j.md"]
        assert third.next_cursor is None
        with pytest.raises(MCPError) as refused:
            await tools.client.list_resources(cursor="no cursor of ours")
        assert refused.value.code == INVALID_PARAMS


async def test_the_prompt_carries_name_description_and_access(open_ms: Any) -> None:
    for read_only, access in (
        (False, "- Access: read-write"),
        (True, "- Access: read-only (you can read these memories; writes fail)"),
    ):
        async with open_ms(read_only=read_only) as backend, connected(backend) as tools:
            prompts = await tools.client.list_prompts()
            assert [p.name for p in prompts.prompts] == ["memory_store"]
            got = await tools.client.get_prompt("memory_store")
            text = got.messages[0].content.text  # type: ignore[union-attr]
            assert text.startswith(f"# Memory\n\nYou have a memory store: {backend.info.name}. ")
            assert "Its memories persist across sessions" in text
            assert access in text
            assert "- Description: for tests" in text
            assert ("`memory_restore`" in text) is not read_only
            with pytest.raises(MCPError) as unknown:
                await tools.client.get_prompt("other")
            assert unknown.value.code == INVALID_PARAMS


async def test_databricks_entries_are_resources(
    workspace: Workspace, dbx_store: str, open_dbx: Callable[..., Any]
) -> None:
    workspace.put(dbx_store, "/fact.md", "water boils at 100 C", description="physics")
    workspace.put(dbx_store, "/other.md", "another session's", session="s2")
    async with open_dbx() as backend, connected(backend) as tools:
        listed = await tools.client.list_resources()
        assert [(r.uri, r.description) for r in listed.resources] == [
            ("memfs://memories/fact.md", "physics")
        ]
        read = await tools.client.read_resource("memfs://memories/fact.md")
        assert read.contents[0].text == "water boils at 100 C"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as missing:
            await tools.client.read_resource("memfs://memories/other.md")
        assert missing.value.code == RESOURCE_NOT_FOUND
        got = await tools.client.get_prompt("memory_store")
        text = got.messages[0].content.text  # type: ignore[union-attr]
        assert "Databricks Agent Memory store" in text and "`save_memory`" in text
