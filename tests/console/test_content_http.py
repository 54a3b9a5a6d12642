"""A memory's content as its page shows it, over plain HTTP (the app in process): Markdown
rendered with raw HTML as text and only safe links live, the raw view's numbered lines, and
``console.markdown``'s link rule address by address."""

from __future__ import annotations

import re

import pytest

from console.test_http import KEY, browser, sign_in
from memfs.contract.models import Actor
from memfs.server.app import create_app
from memfs.server.backends.storage import Storage
from memfs.server.console.markdown import MemoryLinks, render_markdown

AGENT = Actor("session_actor", "sesn_agent")
HOSTILE = (
    "# Notes\n\n"
    "<script>alert(1)</script>\n\n"
    '<a href="javascript:alert(2)">raw</a> <img src=x onerror=alert(3)>\n\n'
    "[js](javascript:alert(4)) [JS](JaVaScRiPt:alert(5)) [vb](vbscript:x) [data](data:text/html,x)"
    " [file](file:///etc/passwd) [ok](https://example.com/a?b=1&c=2) [mail](mailto:a@example.com)"
    " [rel](../other.md) [frag](#top)\n\n"
    "![pixel](https://tracker.example/p.gif) ![](javascript:alert(6))\n"
)


@pytest.mark.parametrize(
    ("source", "href"),
    [
        ("[a](https://example.com/x)", "https://example.com/x"),
        ("[a](http://example.com)", "http://example.com"),
        ("[a](mailto:team@example.com)", "mailto:team@example.com"),
        ("[a](notes/today.md)", "notes/today.md"),
        ("[a](/notes/today.md#now)", "/notes/today.md#now"),
        ("[a](?q=1)", "?q=1"),
        ("<https://example.com>", "https://example.com"),
        ("[a](javascript:alert(1))", None),
        ("[a](JAVASCRIPT:alert(1))", None),
        ("[a](&#106;avascript:alert(1))", None),  # an entity is decoded before the check
        ("<javascript:alert(1)>", None),
        ("[a](vbscript:msgbox)", None),
        ("[a](data:text/html;base64,PHNjcmlwdD4=)", None),
        ("[a](file:///etc/passwd)", None),
        ("[a](ftp://example.com)", None),
        ("[a](x:y/z)", None),  # any other scheme
        ("[a][r]\n\n[r]: javascript:alert(1)", None),
    ],
)
def test_only_http_mailto_and_relative_links_are_live(source: str, href: str | None) -> None:
    html = str(render_markdown(source))
    links = re.findall(r'<a href="([^"]*)" rel="nofollow noopener noreferrer">', html)
    assert links == ([] if href is None else [href.replace("&", "&amp;")]), html
    assert html.count("<a ") == len(links)  # every link carries rel


def test_markdown_holds_no_markup_an_agent_wrote() -> None:
    html = str(render_markdown(HOSTILE))
    assert "<h3>Notes</h3>" in html  # "#" under the page's h1 and "Content" h2
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html
    assert "<img" not in html and "onerror=alert(3)&gt;" in html
    live = re.findall(r'(?:href|src)="([^"]*)"', html)  # every address a browser would follow
    assert live == [
        "https://example.com/a?b=1&amp;c=2",
        "mailto:a@example.com",
        "../other.md",
        "#top",
        "https://tracker.example/p.gif",
    ]
    # an image is a link to its address, never loaded; one with a refused address, its source
    assert (
        '<a href="https://tracker.example/p.gif" rel="nofollow noopener noreferrer">'
        "image: pixel</a>" in html
    )
    assert "![](javascript:alert(6))" in html


def test_a_table_column_is_aligned_by_class_not_by_the_style_the_csp_refuses() -> None:
    html = str(render_markdown("| a | b |\n|:-:|--:|\n| 1 | 2 |\n"))
    assert "style=" not in html
    assert html.count('class="align-center"') == 2 and html.count('class="align-right"') == 2


async def test_the_memory_page_renders_markdown_and_numbers_raw_lines(storage: Storage) -> None:
    store = await storage.create_store(name="Views", description="", metadata={})
    md = await storage.create_memory(store.id, path="/a.md", content=HOSTILE, actor=AGENT)
    text = await storage.create_memory(store.id, path="/b.txt", content="x\n\n# y", actor=AGENT)
    base = f"/console/stores/{store.id}/memories"
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        rendered = await client.get(f"{base}/{md.id}")
        assert rendered.status_code == 200
        assert '<div class="markdown"><h3>Notes</h3>' in rendered.text
        assert 'aria-current="page">Rendered</a>' in rendered.text
        assert "<script>alert" not in rendered.text and "<img" not in rendered.text
        raw = await client.get(f"{base}/{md.id}", params={"view": "raw"})
        assert 'class="markdown"' not in raw.text and 'aria-current="page">Raw</a>' in raw.text
        assert '<tr id="L3"><td class="num">3</td><td class="code">&lt;script&gt;' in raw.text
        plain = await client.get(f"{base}/{text.id}")  # not Markdown: raw, no tabs
        rows = re.findall(r'<td class="num">(\d+)</td><td class="code">([^<]*)</td>', plain.text)
        assert rows == [("1", "x"), ("2", "\n"), ("3", "# y")]
        assert "Rendered</a>" not in plain.text


@pytest.mark.parametrize(
    ("source", "href"),
    [
        ("[a](todo.md)", "/console/stores/s/open?path=/notes/day/todo.md"),
        ("[a](../ideas.md#now)", "/console/stores/s/open?path=/notes/ideas.md#now"),
        ("[a](/top.md)", "/console/stores/s/open?path=/top.md"),
        ("[a](../../../../up.md)", "/console/stores/s/open?path=/up.md"),  # never above "/"
        ("[a](my%20plan.md?raw=1)", "/console/stores/s/open?path=/notes/day/my%20plan.md"),
        ("![chart](chart.png)", "/console/stores/s/open?path=/notes/day/chart.png"),
        ("[a](#section)", "#section"),
        ("[a](?q=1)", "?q=1"),
        ("[a](//example.com/x.md)", "//example.com/x.md"),
        ("[a](https://example.com/x.md)", "https://example.com/x.md"),
    ],
)
def test_a_link_to_another_memory_opens_its_page(source: str, href: str) -> None:
    """A relative or absolute path names a memory of the store, read from the linking memory's
    folder: its link goes to the console's opener for that path; other addresses keep theirs."""
    html = str(render_markdown(source, MemoryLinks("/console/stores/s/open", "/notes/day/log.md")))
    assert re.findall(r'<a href="([^"]*)"', html) == [href], html


async def test_the_opener_redirects_to_the_memory_at_a_path(storage: Storage) -> None:
    """A memory's page links its neighbour through the opener, which answers with the
    neighbour's page; a path holding no memory is 404 naming it, an invalid one 400."""
    store = await storage.create_store(name="Links", description="", metadata={})
    log = await storage.create_memory(
        store.id, path="/notes/log.md", content="see [the plan](plan%20b.md)", actor=AGENT
    )
    plan = await storage.create_memory(
        store.id, path="/notes/plan b.md", content="# Plan", actor=AGENT
    )
    console = f"/console/stores/{store.id}"
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        page = await client.get(f"{console}/memories/{log.id}")
        opener = f"{console}/open?path=/notes/plan%20b.md"
        assert f'<a href="{opener}" rel="nofollow noopener noreferrer">the plan</a>' in page.text
        opened = await client.get(opener)
        assert opened.status_code == 303
        assert opened.headers["location"] == f"{console}/memories/{plan.id}"
        missing = await client.get(f"{console}/open", params={"path": "/notes/plan.md"})
        assert missing.status_code == 404 and "/notes/plan.md" in missing.text
        invalid = await client.get(f"{console}/open", params={"path": "no-slash"})
        assert invalid.status_code == 400
