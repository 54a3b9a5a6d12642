"""A memory's content as its page shows it: Markdown rendered safely, or numbered lines.

``render_markdown`` turns agent-written Markdown into HTML with markdown-it-py (CommonMark,
plus tables and strikethrough): its output is the one piece of markup the console marks safe,
and it holds nothing an agent wrote but escaped text and these rules' elements:
- raw HTML is never rendered (``html`` off: ``<script>`` is shown as text);
- a link is live only to http(s), mailto or a relative address (``_link_allowed``), and carries
  ``rel="nofollow noopener noreferrer"``; any other (``javascript:``, ``data:``…) is its text;
- a link to another memory (``other.md``, ``../notes/todo.md``, ``/notes/todo.md``: a relative
  address, which on the console's pages would name a console URL) goes to the console's page
  for the memory at that path of the store (``MemoryLinks``), its ``#fragment`` kept;
- an image is never loaded: it becomes a link to its address, named by its alt text (the CSP,
  ``default-src 'self'``, would refuse a remote one anyway);
- a table column's alignment is a class (``align-center``), not the ``style`` attribute the
  CSP refuses;
- headings go two levels down (``#`` is an ``h3``): the page has its ``h1`` and "Content" ``h2``.

``content_view`` picks a page's view: rendered for a Markdown path (``.md``) unless the page
asks for ``?view=raw``, else the raw view, whose lines are numbered as the compare page numbers
them (``str.splitlines``). Rendering runs in a worker thread: a hostile 100 KiB (the content
limit) takes markdown-it up to ~2.5 s, which must not stall the server's other requests; the
last ``RENDERED_KEPT`` renderings are kept (by content), so a page viewed again costs nothing.
This module must not touch storage or HTTP.
"""

from __future__ import annotations

import functools
import logging
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

import trio
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

log = logging.getLogger(__name__)

MARKDOWN_SUFFIXES = (".md", ".markdown")
LINK_REL = "nofollow noopener noreferrer"
RENDERED_KEPT = 16  # at most ~16 x (100 KiB of content + its HTML) held
HEADING_SHIFT = 2  # the page's h1 (the path) and h2 ("Content") sit above a memory's "#"
# a scheme, as URLs spell it: what comes before the first ":" if no "/", "?" or "#" does
_SCHEME = re.compile(r"^([^/?#]*):")
_SCHEMES = frozenset({"http", "https", "mailto"})
_ALIGNMENTS = {f"text-align:{side}": f"align-{side}" for side in ("left", "center", "right")}


def is_markdown(path: str | None) -> bool:
    return path is not None and path.lower().endswith(MARKDOWN_SUFFIXES)


def _link_allowed(url: str) -> bool:
    """http(s), mailto, or no scheme at all (relative, ``//host``, ``#anchor``)."""
    scheme = _SCHEME.match(url.strip())
    return scheme is None or scheme.group(1).lower() in _SCHEMES


@dataclass(frozen=True)
class MemoryLinks:
    """Where a memory's links to other memories go: ``opener`` is the console's address that
    opens the memory at a path (``?path=`` follows), ``path`` the linking memory's own."""

    opener: str
    path: str

    def href(self, url: str) -> str | None:
        """The console address for ``url`` when it names a memory of the store (no scheme, no
        host, not only a ``#fragment``), else None (the link keeps its address)."""
        if _SCHEME.match(url) or url.startswith(("//", "#", "?")):
            return None
        address, _, fragment = url.partition("#")
        named = unquote(address.partition("?")[0])
        if not named:
            return None
        folder = posixpath.dirname(self.path)
        target = posixpath.normpath(posixpath.join(folder, named))  # "/a/../b" is "/b"
        target = "/" + target.lstrip("/")  # never above the root ("//x" is "/x")
        href = f"{self.opener}?path={quote(target, safe='/')}"
        return f"{href}#{fragment}" if fragment else href


class _ConsoleMarkdown(MarkdownIt):
    def validateLink(self, url: str) -> bool:
        # a refused address leaves the link's href empty: ``_tame`` shows it as its text
        return _link_allowed(url)


def _tame(state: StateCore) -> None:
    """Links without a live address become text, the others get ``rel`` (and go to the console's
    page of a memory they name: ``state.env["links"]``, a ``MemoryLinks``); images become links;
    headings move down (module docstring)."""
    links = state.env.get("links")
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + HEADING_SHIFT)}"
        if token.type in ("th_open", "td_open") and "style" in token.attrs:
            token.attrs = {"class": _ALIGNMENTS.get(str(token.attrs["style"]), "")}
        if token.children:
            token.children = _tame_inline(token.children, links)


def _live_href(url: str, links: MemoryLinks | None) -> str:
    return (links.href(url) if links is not None else None) or url


def _tame_inline(children: Sequence[Token], links: MemoryLinks | None) -> list[Token]:
    tamed: list[Token] = []
    dead = False  # inside a link without a live address (CommonMark links never nest)
    for token in children:
        if token.type == "link_open":
            href = token.attrGet("href")
            dead = not (isinstance(href, str) and href and _link_allowed(href))
            token.attrs = {} if dead else {"href": _live_href(str(href), links), "rel": LINK_REL}
            token.tag = "span" if dead else "a"
        elif token.type == "link_close":
            token.tag = "span" if dead else "a"
            dead = False
        elif token.type == "image":
            inside_link = dead or _open_link(tamed)
            tamed.extend(_image_as_link(token, links, inside_link=inside_link))
            continue
        tamed.append(token)
    return tamed


def _open_link(tokens: Sequence[Token]) -> bool:
    for token in reversed(tokens):
        if token.type in ("link_open", "link_close"):
            return token.type == "link_open"
    return False


def _image_as_link(image: Token, links: MemoryLinks | None, *, inside_link: bool) -> list[Token]:
    """An image as a link to its address, "image: ALT" (no link inside a link)."""
    src = image.attrGet("src")
    name = Token("text", "", 0, content=f"image: {image.content}" if image.content else "image")
    if inside_link or not (isinstance(src, str) and src and _link_allowed(src)):
        return [name]
    opening = Token("link_open", "a", 1, attrs={"href": _live_href(src, links), "rel": LINK_REL})
    return [opening, name, Token("link_close", "a", -1)]


_RENDERER = _ConsoleMarkdown("commonmark", {"html": False, "linkify": False})
_RENDERER.enable(["table", "strikethrough"])
_RENDERER.core.ruler.push("console_tame", _tame)


@functools.lru_cache(maxsize=RENDERED_KEPT)
def render_markdown(text: str, links: MemoryLinks | None = None) -> Markup:
    """``text`` as HTML (module docstring: what it may hold); ``links``: where its links to
    other memories go (None: they keep their addresses)."""
    return Markup(_RENDERER.render(text, {"links": links}))


@dataclass(frozen=True)
class ContentView:
    """What a page's "Content" shows: ``rendered`` Markdown, or (None) the numbered ``lines``;
    ``markdown``: the path is Markdown's, so the page links both views (``url``: the page)."""

    url: str
    markdown: bool
    rendered: Markup | None
    lines: list[str]


async def content_view(
    url: str, path: str | None, content: str, view: str | None, opener: str | None = None
) -> ContentView:
    """The view of ``content`` a page at ``url`` asked for (``view``: the query's); ``opener``:
    the console's address that opens a memory of the store by path (``MemoryLinks``)."""
    markdown = is_markdown(path)
    if markdown and view != "raw":
        links = MemoryLinks(opener, path) if opener is not None and path is not None else None
        rendered = await trio.to_thread.run_sync(render_markdown, content, links)
        return ContentView(url, markdown, rendered, [])
    return ContentView(url, markdown, None, content.splitlines())
