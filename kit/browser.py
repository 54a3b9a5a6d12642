"""A real headless Chromium for the console's tests: Debian's ``chromium`` driven by Playwright.

Playwright never downloads a browser here (its own build cannot run on this machine): it is
pointed at ``CHROMIUM`` (``executable_path``). ``needs_chromium`` skips a module, with the
reason, only when that binary is absent (``make setup`` installs it; CI runs these tests).
``Watched`` records what a page did that it must not (dialogs, script errors, console errors),
so a test can assert that agent-written markup ran nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

CHROMIUM = os.environ.get("MEMFS_TEST_CHROMIUM", "/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"{CHROMIUM} is not installed (Debian's chromium package: make setup installs it)",
)
TIMEOUT_MS = 15_000
HTTP_STATUS = "Failed to load resource: the server responded with a status of"


def launch_args() -> dict[str, Any]:
    return {"executable_path": CHROMIUM, "args": ["--no-sandbox"], "headless": True}


@dataclass
class Watched:
    """What a page did that a page of agent-written text never should."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        # an answer's status (a 409 conflict page, say) is no script error
        if message.type == "error" and not message.text.startswith(HTTP_STATUS):
            self.errors.append(message.text)


# agent-written markup the console must show as text: either one, run, sets ``window.__pwned``
XSS_IMG = "<img src=x onerror=window.__pwned=1;alert(1)>"
XSS_SCRIPT = "<script>window.__pwned=2;alert(2)</script>"


# the console's tones (console.css), as getComputedStyle gives a background
SUCCESS = "rgb(240, 255, 244)"  # a notice that something was done ("Saved.")
WARNING = "rgb(255, 248, 197)"  # a notice or button that asks for a second thought
PRIMARY = "rgb(26, 127, 55)"  # a page's main action
DESTRUCTIVE = "rgb(180, 35, 24)"  # a button that loses or overwrites data


def background(locator: Any) -> str:
    """The computed background colour of the element ``locator`` finds."""
    return str(locator.evaluate("e => getComputedStyle(e).backgroundColor"))


def diff_rows(page: Any, view: str = "unified") -> list[tuple[str, ...]]:
    """A diff table's rows (``templates/_diff_table.html``), each its cells' text; a hunk's
    header, one cell wide, comes last in a row of blanks. Unified: old number, new number,
    sign, text; split: old number, old text, new number, new text."""
    table: list[tuple[str, ...]] = []
    for row in page.locator(f"table.diff.{view} tbody tr").all():
        cells = tuple(cell.rstrip("\n") for cell in row.locator("td").all_inner_texts())
        table.append(("", "", "", cells[0]) if len(cells) == 1 else cells)
    return table


def content_lines(page: Any) -> list[tuple[str, str]]:
    """The raw view's rows (``templates/_content.html``): each line's number and its text."""
    rows = page.eval_on_selector_all(
        "table.lines tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )
    return [(number, text.rstrip("\n")) for number, text in rows]


def rendered_text(page: Any) -> str:
    """The text of a memory's rendered Markdown (``templates/_content.html``)."""
    return str(page.locator("div.markdown").inner_text())


def check_sky_conflict(page: Any) -> None:
    """The edit conflict both consoles' tests stage (theirs ``sky: grey\\ngrass: green``,
    yours ``sky: blue\\ngrass: green\\nsea: salty``) shown as theirs against yours: numbered
    lines, and in the edited line only the changed word marked."""
    assert diff_rows(page) == [
        ("", "", "", "@@ -1,2 +1,3 @@"),
        ("1", "", "-", "sky: grey"),
        ("", "1", "+", "sky: blue"),
        ("2", "2", "", "grass: green"),
        ("", "3", "+", "sea: salty"),
    ]
    assert page.locator("table.diff del").all_inner_texts() == ["grey"]  # theirs
    assert page.locator("table.diff ins").all_inner_texts() == ["blue"]  # yours


def api(base_url: str, key: str) -> httpx.Client:
    """A plain API client of the server (to seed stores, and to write as another writer)."""
    return httpx.Client(
        base_url=base_url,
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        timeout=10,
    )


def sign_in(page: Any, base_url: str, key: str) -> Any:
    """Sign ``page`` in to the console at ``base_url`` with ``key``; it ends on the stores page."""
    page.goto(base_url + "/console/sign-in")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base_url + "/console/")
    return page
