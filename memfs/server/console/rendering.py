"""Turning a page's data into HTML: the console's Jinja2 environment and its one-line messages.

``Renderer.page`` renders a template of ``templates/`` (every page extends ``base.html``: the
skip link, the header with the signed-in key and "Sign out", one ``<main>``) into an
``HTMLResponse``. Autoescaping is on for every template, whatever its name: everything a page
shows of a store (names, paths, contents, descriptions, snippets, diffs) is agent-written text
and reaches the browser as text. The one thing marked safe is ``console.markdown``'s rendering
of a memory, which holds no markup an agent wrote. ``StrictUndefined``
makes a misspelt variable an error, not an empty string.

``NOTICES`` are the messages a redirect may ask a page to show (``?notice=saved``): the query
names one of them, so nothing a link carries is ever shown. Those of ``WARNING_NOTICES`` say
that something the user did was not done, and are shown as a warning, not as a success.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from memfs.server.console import wording
from memfs.server.console.sessions import SignedIn

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).parent / "templates"
NOTICES = {
    "created": "Memory created.",
    "saved": "Saved.",
    "renamed": "Renamed.",
    "deleted": "Memory deleted.",
    "store-created": "Store created.",
    "store-saved": "Store saved.",
    "store-archived": "Store archived: it is read-only now.",
    "store-deleted": "Store deleted.",
    "signed-out": "Signed out.",
    "kept-theirs": "Kept their version; yours was not saved.",
    "restored": "Restored: the version's content is the memory's again.",
    "same": "Nothing to restore: the memory holds this version's content already.",
    "redacted": "Redacted: this version's content is gone.",
    "unchanged": "Nothing to save: you changed nothing.",
    "entry-created": "Entry created.",
    "entry-deleted": "Entry deleted.",
}
WARNING_NOTICES = frozenset({"kept-theirs"})


def _thousands(value: int) -> str:
    return f"{value:,}"


def _has_carriage_return(value: str) -> bool:
    return "\r" in value


class Renderer:
    """The console's templates (module docstring)."""

    def __init__(self) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=True,  # every template, .html or not
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,
        )
        self.env.filters["thousands"] = _thousands
        self.env.tests["carriage_return"] = _has_carriage_return
        self.env.filters["ago"] = wording.ago
        self.env.filters["exact_time"] = wording.exact_time
        self.env.filters["machine_time"] = wording.machine_time
        self.env.filters["short_time"] = wording.short_time
        self.env.filters["writer"] = wording.writer

    def page(
        self,
        request: Request,
        template: str,
        *,
        signed_in: SignedIn | None,
        status: int = 200,
        error: str | None = None,
        headers: dict[str, str] | None = None,
        **context: Any,
    ) -> HTMLResponse:
        notice_name = request.query_params.get("notice", "")
        notice = NOTICES.get(notice_name)
        html = self.env.get_template(template).render(
            signed_in=signed_in,
            csrf=signed_in.csrf() if signed_in is not None else "",
            notice=notice,
            notice_is_warning=notice_name in WARNING_NOTICES,
            error=error,
            **context,
        )
        return HTMLResponse(html, status_code=status, headers=headers)
