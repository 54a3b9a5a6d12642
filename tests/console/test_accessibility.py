"""Every kind of console page, with realistic content, checked from its DOM in a real Chromium:
one ``h1`` and no skipped heading level; an accessible name on every field, button and link, alt
on images; ``html[lang]``, a title naming the page (its ``h1``), ``main`` and a skip link to it
that is the first thing Tab reaches; Tab from the top reaching the page's primary action, with
a visible focus at every stop and no positive ``tabindex``; and at a phone's width (390x844) no
sideways scrolling, with long unbroken paths, names and content lines. No library: each check is
a small function running a few lines of DOM script, and a failure names the page and the
element."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from kit.browser import api, needs_chromium, sign_in
from kit.databricks import API, Workspace
from kit.servers import ServerProcess

pytestmark = needs_chromium

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}

# long unbroken text an agent may well write: a path of long names, a token, a URL
LONG_WORD = "infrastructure-migration-to-the-new-kubernetes-cluster-in-eu-west-" * 2
LONG_PATH = f"/projects/{LONG_WORD}/decisions/why-we-chose-postgresql-{LONG_WORD}.md"
LONG_LINE = "token=" + "Zm9vYmFyYmF6" * 60
LONG_URL = "https://wiki.example.com/" + "very-long-page-name-" * 12
CONTENT = f"# Decision\n\nWe moved the database.\n{LONG_LINE}\nSee {LONG_URL}\n"
THEIRS = CONTENT + "Theirs.\n"
# rendered Markdown at its widest: a table of six columns of unbroken words, a long code line
WIDE_MARKDOWN = (
    f"# Wide\n\n| {' | '.join(f'{n}-{LONG_WORD}' for n in range(6))} |\n|{'---|' * 6}\n"
    f"| {' | '.join(LONG_LINE[:80] for _ in range(6))} |\n\n```\n{LONG_LINE}\n```\n"
)
OVER = ("button", "Save over theirs")
STORE_NAME = "Platform-team-quarterly-planning-and-retrospective-notes-" * 2

# the DOM helpers every check shares: an element's accessible name (the parts of the
# accessible-name computation the console's markup uses) and a line that names an element
COMMON = r"""
const text = (el) => (el.textContent || "").replace(/\s+/g, " ").trim();
const short = (words) => (words.length > 60 ? words.slice(0, 59) + "…" : words);
const accessibleName = (el) => {
  const by = el.getAttribute("aria-labelledby");
  if (by) {
    return by.split(/\s+/).map((id) => document.getElementById(id))
      .filter(Boolean).map(text).join(" ").trim();
  }
  const label = (el.getAttribute("aria-label") || "").trim();
  if (label) return label;
  if (el.labels && el.labels.length) return Array.from(el.labels).map(text).join(" ").trim();
  if (el.tagName === "INPUT" && ["submit", "button", "reset"].includes(el.type)) return el.value;
  if (["A", "BUTTON", "SUMMARY"].includes(el.tagName)) {
    const alts = Array.from(el.querySelectorAll("img[alt]")).map((img) => img.alt);
    const own = [text(el), ...alts].join(" ").trim();
    if (own) return own;
  }
  return (el.getAttribute("title") || "").trim();
};
const describe = (el) => {
  let what = el.tagName.toLowerCase();
  if (el.id) what += "#" + el.id;
  if (el.getAttribute("name")) what += `[name=${el.getAttribute("name")}]`;
  if (el.classList.length) what += "." + Array.from(el.classList).join(".");
  const words = text(el);
  return words ? `${what} "${short(words)}"` : what;
};
const FOCUSABLE = 'a[href], button, input:not([type="hidden"]), select, textarea, summary, '
  + '[tabindex]:not([tabindex="-1"])';
const role = (el) => {
  if (el.tagName === "A") return "link";
  if (el.tagName === "BUTTON") return "button";
  if (el.tagName === "INPUT" && ["submit", "button", "reset"].includes(el.type)) return "button";
  return el.tagName.toLowerCase();
};
"""


def _dom(page: Any, body: str, arg: Any = None) -> Any:
    """Run ``body`` (a function body of ``arg``, with ``COMMON`` in scope) in ``page``."""
    return page.evaluate(f"(arg) => {{ {COMMON}\n{body} }}", arg)


def headings(page: Any) -> list[str]:
    """Exactly one ``h1``; going down, no level skipped (h1 -> h3); no empty heading."""
    return list(
        _dom(
            page,
            """
    const found = Array.from(document.querySelectorAll("h1, h2, h3, h4, h5, h6"));
    const problems = [];
    const ones = found.filter((h) => h.tagName === "H1").length;
    if (ones !== 1) problems.push(`${ones} h1 elements, not one`);
    let previous = 0;
    for (const h of found) {
      const level = Number(h.tagName[1]);
      if (level > previous + 1) problems.push(`${describe(h)} follows h${previous}`);
      if (!text(h)) problems.push(`${describe(h)} is empty`);
      previous = level;
    }
    return problems;
    """,
        )
    )


def names(page: Any) -> list[str]:
    """Every field (not hidden), button and link has an accessible name; images have alt;
    ``aria-labelledby`` points at elements with text."""
    return list(
        _dom(
            page,
            """
    const problems = [];
    const fields = 'input:not([type="hidden"]), textarea, select';
    for (const el of document.querySelectorAll(fields)) {
      if (!accessibleName(el)) problems.push(`field ${describe(el)} has no label`);
    }
    for (const el of document.querySelectorAll('a[href], button, summary')) {
      if (!accessibleName(el)) problems.push(`${role(el)} ${describe(el)} has no name`);
    }
    for (const el of document.querySelectorAll("img:not([alt])")) {
      problems.push(`image ${describe(el)} has no alt`);
    }
    for (const el of document.querySelectorAll("[aria-labelledby], [aria-describedby]")) {
      for (const attr of ["aria-labelledby", "aria-describedby"]) {
        for (const id of (el.getAttribute(attr) || "").split(/\\s+/).filter(Boolean)) {
          const target = document.getElementById(id);
          if (!target || !text(target)) problems.push(`${describe(el)} ${attr} ${id}: no text`);
        }
      }
    }
    return problems;
    """,
        )
    )


def landmarks(page: Any) -> list[str]:
    """``html[lang]``; a phone's viewport (``width=device-width``); a title naming the page
    (``"<its h1> · memfs console"``); one ``main``;
    the first focusable element a link to it; no positive ``tabindex``."""
    return list(
        _dom(
            page,
            """
    const problems = [];
    if (!document.documentElement.lang) problems.push("html has no lang");
    // without it a phone lays the page out 980 px wide and shrinks it: unreadable text
    const viewport = document.querySelector('meta[name="viewport"]');
    if (!viewport || !viewport.content.includes("width=device-width")) {
      problems.push("no meta viewport width=device-width");
    }
    const h1 = document.querySelector("h1");
    const wanted = `${h1 ? text(h1) : "?"} · memfs console`;
    if (document.title.replace(/\\s+/g, " ").trim() !== wanted) {
      problems.push(`title "${short(document.title)}" is not "${short(wanted)}"`);
    }
    const mains = document.querySelectorAll("main");
    if (mains.length !== 1) problems.push(`${mains.length} main elements, not one`);
    const first = Array.from(document.querySelectorAll(FOCUSABLE))
      .find((el) => !el.disabled && !el.closest("[hidden]"));
    const target = first && first.hash && document.getElementById(first.hash.slice(1));
    if (!target || target.tagName !== "MAIN") {
      problems.push(`the first focusable element, ${first ? describe(first) : "none"}, `
        + "is no skip link to main");
    }
    for (const el of document.querySelectorAll("[tabindex]")) {
      if (Number(el.getAttribute("tabindex")) > 0) problems.push(`${describe(el)} tabindex > 0`);
    }
    return problems;
    """,
        )
    )


def keyboard(page: Any, primary: tuple[str, str]) -> list[str]:
    """Tab from the top: the skip link first, then on to ``primary`` (role, accessible name);
    every element focused on the way shows it (an outline or a box shadow); the skip link
    moves the focus to ``main``."""
    problems: list[str] = []
    stops = _dom(page, "return document.querySelectorAll(FOCUSABLE).length;") + 2
    reached = False
    for number in range(1, stops + 1):
        page.keyboard.press("Tab")
        focused = _dom(
            page,
            """
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const style = getComputedStyle(el);
    const outlined = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0;
    return {what: describe(el), role: role(el), name: accessibleName(el),
            visible: outlined || style.boxShadow !== "none",
            skip: el.classList.contains("skip")};
    """,
        )
        if focused is None:
            break
        if number == 1 and not focused["skip"]:
            problems.append(f"the first Tab focuses {focused['what']}, not the skip link")
        if not focused["visible"]:
            problems.append(f"focus on {focused['what']} is not visible (no outline or shadow)")
        if (focused["role"], focused["name"]) == primary:
            reached = True
            break
    if not reached:
        problems.append(f"Tab from the top never reaches the {primary[0]} {primary[1]!r}")
    page.locator("a.skip").focus()
    page.keyboard.press("Enter")
    if page.evaluate("document.activeElement.tagName") != "MAIN":
        problems.append("the skip link does not move the focus to main")
    return problems


def phone_fits(page: Any) -> list[str]:
    """At 390x844, nothing scrolls sideways: not the page, not a box inside it (text fields
    scroll their own text, as they must); the widest offenders named."""
    page.set_viewport_size(PHONE)
    try:
        return list(
            _dom(
                page,
                """
    const problems = [];
    const root = document.documentElement;
    const width = root.clientWidth;
    // an element past the screen's edge, or one whose content (a long line) spills out of it
    const wider = (el) => {
      const box = el.getBoundingClientRect();
      if (box.width > 0 && box.right > width + 0.5) return true;
      return el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX === "visible"
        && el.clientWidth > 0;
    };
    if (root.scrollWidth > width) {
      const wide = Array.from(document.body.querySelectorAll("*")).filter(wider)
        .filter((el) => !Array.from(el.children).some(wider)).slice(0, 5);
      problems.push(`the page scrolls sideways (${root.scrollWidth} > ${width} px): `
        + wide.map(describe).join("; "));
    }
    for (const el of document.body.querySelectorAll("*")) {
      if (["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName)) continue;
      const overflow = getComputedStyle(el).overflowX;
      if (["auto", "scroll"].includes(overflow) && el.scrollWidth > el.clientWidth + 1) {
        problems.push(`${describe(el)} scrolls sideways (${el.scrollWidth} > ${el.clientWidth})`);
      }
    }
    return problems;
    """,
            )
        )
    finally:
        page.set_viewport_size(DESKTOP)


@dataclass(frozen=True)
class Visit:
    """A page kind: what to call it in a failure, where it is, and its primary action."""

    name: str
    url: str
    primary: tuple[str, str]


def check(page: Any, visit: Visit, *, status: int = 200, go: bool = True) -> list[str]:
    """Every check on ``visit``'s page (opened unless ``go`` is false: a page a form led to),
    each problem prefixed with the page's name."""
    if go:
        answer = page.goto(visit.url)
        assert answer is not None and answer.status == status, (visit.name, answer)
    problems = headings(page) + names(page) + landmarks(page)
    problems += keyboard(page, visit.primary) + phone_fits(page)
    return [f"{visit.name}: {problem}" for problem in problems]


def entry_id(entry: dict[str, Any]) -> str:
    return str(entry["name"].rsplit("/", 1)[1])


def check_all(page: Any, visits: list[Visit]) -> list[str]:
    return [problem for visit in visits for problem in check(page, visit)]


def interrupted(
    page: Any, name: str, edit_url: str, their_write: Callable[[], None], primary: tuple[str, str]
) -> list[str]:
    """Every check on the page a "Save" of ``edit_url`` leads to when ``their_write`` changed
    or deleted the item between the page's load and its save (a conflict; "deleted")."""
    page.goto(edit_url)
    page.get_by_label("Content").fill(CONTENT + "Mine.\n")
    their_write()
    page.get_by_role("button", name="Save").click()
    page.get_by_role(primary[0], name=primary[1]).wait_for()
    return check(page, Visit(name, page.url, primary), go=False)


def assert_none(problems: list[str]) -> None:
    assert not problems, "\n".join(["accessibility problems:", *problems])


@pytest.fixture
def console(page: Any, console_server: ServerProcess) -> Any:
    page.set_viewport_size(DESKTOP)
    return sign_in(page, console_server.base_url, console_server.api_key)


class Store:
    """A Memory Stores store seeded through the API, as an agent team's would look."""

    def __init__(self, client: httpx.Client, base_url: str) -> None:
        self.client = client
        made = client.post(
            "/v1/memory_stores",
            json={
                "name": STORE_NAME,
                "description": f"What the platform agents remember. Source: {LONG_URL}",
                "metadata": {"owner": "platform-team", "source": LONG_URL},
            },
        )
        assert made.status_code == 200, made.text
        self.id = str(made.json()["id"])
        self.url = f"{base_url}/console/stores/{self.id}"
        self.api = f"/v1/memory_stores/{self.id}/memories"

    def create(self, path: str, content: str) -> str:
        made = self.client.post(self.api, json={"path": path, "content": content})
        assert made.status_code == 200, made.text
        return str(made.json()["id"])

    def update(self, memory_id: str, content: str) -> None:
        done = self.client.post(f"{self.api}/{memory_id}", json={"content": content})
        assert done.status_code == 200, done.text

    def delete(self, memory_id: str) -> None:
        assert self.client.delete(f"{self.api}/{memory_id}").status_code in (200, 204)

    def versions(self, memory_id: str) -> list[str]:
        """Newest first."""
        listed = self.client.get(
            f"/v1/memory_stores/{self.id}/memory_versions", params={"memory_id": memory_id}
        )
        assert listed.status_code == 200, listed.text
        return [str(version["id"]) for version in listed.json()["data"]]


@pytest.fixture
def seeded(console_server: ServerProcess) -> Iterator[tuple[Store, str]]:
    """A store with folders, a long path, long lines, a memory with three versions and a
    deleted one; the id of the memory with the long path and the three versions."""
    with api(console_server.base_url, console_server.api_key) as client:
        store = Store(client, console_server.base_url)
        store.create("/notes/today.md", "Standup at 10.\n")
        store.create("/animals/okapi.md", "The okapi lives in the forest of the Congo.\n")
        store.delete(store.create("/scratch/old.md", "to delete\n"))
        memory_id = store.create(LONG_PATH, CONTENT)
        store.update(memory_id, CONTENT + "Second thoughts.\n")
        store.update(memory_id, CONTENT.replace("moved", "migrated") + "Second thoughts.\n")
        yield store, memory_id


def test_sign_in_page(page: Any, console_server: ServerProcess) -> None:
    page.set_viewport_size(DESKTOP)
    visit = Visit("sign-in", console_server.base_url + "/console/sign-in", ("button", "Sign in"))
    assert_none(check(page, visit))


def test_memory_store_pages(console: Any, seeded: tuple[Store, str]) -> None:
    page = console
    store, memory_id = seeded
    memory = f"{store.url}/memories/{memory_id}"
    wide = store.create("/notes/wide.md", WIDE_MARKDOWN)
    visits = [
        Visit("stores", page.url, ("button", "Create store")),
        Visit("store settings", f"{store.url}/settings", ("button", "Save")),
        Visit("store", store.url, ("button", "Search")),
        Visit("search results", f"{store.url}/search?q=okapi+database", ("button", "Search")),
        Visit("new memory", f"{store.url}/new", ("button", "Create")),
        Visit("memory", memory, ("link", "Edit")),
        Visit("memory, raw", f"{memory}?view=raw", ("link", "Edit")),
        Visit("memory, a wide table", f"{store.url}/memories/{wide}", ("link", "Edit")),
        Visit("edit", f"{memory}/edit", ("button", "Save")),
        Visit("rename", f"{memory}/rename", ("button", "Rename")),
        Visit("delete", f"{memory}/delete", ("button", "Delete")),
    ]
    problems = check_all(page, visits)
    # the edit conflict: another writer saves between the page's load and its save
    problems += interrupted(
        page, "edit conflict", f"{memory}/edit", lambda: store.update(memory_id, THEIRS), OVER
    )
    doomed = store.create("/notes/doomed.md", CONTENT)
    back = ("link", f"Back to {STORE_NAME}")
    problems += interrupted(
        page,
        "memory deleted",
        f"{store.url}/memories/{doomed}/edit",
        lambda: store.delete(doomed),
        back,
    )
    missing = Visit(
        "error (404)", f"{store.url}/memories/mem_nonexistent", ("link", "Back to the stores")
    )
    problems += check(page, missing, status=404)
    assert_none(problems)


def test_history_pages(console: Any, seeded: tuple[Store, str]) -> None:
    page = console
    store, memory_id = seeded
    memory = f"{store.url}/memories/{memory_id}"
    head, middle, first = store.versions(memory_id)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    visits = [
        Visit("a memory's history", f"{memory}/history", ("button", "Compare")),
        Visit("a version", f"{memory}/versions/{first}", ("button", "Restore")),
        Visit("a version, raw", f"{memory}/versions/{first}?view=raw", ("button", "Restore")),
        Visit(
            "compare",
            f"{memory}/history/compare?from={first}&to={head}",
            ("link", "its history"),
        ),
        Visit("redact confirmation", f"{memory}/versions/{middle}/redact", ("button", "Redact")),
        Visit("the store's history", f"{store.url}/history", ("button", "Filter")),
        Visit("the store as of", f"{store.url}/as-of?at={now}", ("button", "Show")),
    ]
    assert_none(check_all(page, visits))


def test_databricks_pages(console: Any, console_server: ServerProcess) -> None:
    page = console
    base = f"{console_server.base_url}/console/databricks"
    long_actor = "agent-" + "research-assistant-for-the-platform-team-" * 2
    long_session = "session-" + uuid.uuid4().hex * 3
    with Workspace(console_server) as workspace:
        store = workspace.create_store()
        workspace.put(store, "/facts.md", "The sky is blue.\n", description="facts")
        workspace.put(
            store,
            LONG_PATH,
            CONTENT,
            actor=long_actor,
            session=long_session,
            description=f"Why we moved: {LONG_URL}",
        )
        entry = workspace.put(store, "/plan.md", CONTENT, actor=long_actor, session=long_session)
        entry_url = f"{base}/{store}/entries/{entry_id(entry)}"
        actor = httpx.QueryParams({"actor": long_actor})
        in_session = httpx.QueryParams({"actor": long_actor, "session": long_session})
        searched = in_session.set("q", "database moved")
        visits = [
            Visit("a Databricks store", f"{base}/{store}", ("button", "Search")),
            Visit("an actor", f"{base}/{store}/actor?{actor}", ("button", "Search")),
            Visit("entries", f"{base}/{store}/entries?{in_session}", ("link", "/plan.md")),
            Visit("an entry", entry_url, ("link", "Edit")),
            Visit("edit an entry", f"{entry_url}/edit", ("button", "Save")),
            Visit("delete an entry", f"{entry_url}/delete", ("button", "Delete")),
            Visit("new entry", f"{base}/{store}/new", ("button", "Create")),
            Visit("search entries", f"{base}/{store}/search?{searched}", ("button", "Search")),
        ]
        problems = check_all(page, visits)
        problems += interrupted(
            page,
            "an entry's edit conflict",
            f"{entry_url}/edit",
            lambda: workspace.patch(store, entry, THEIRS),
            OVER,
        )
        doomed = workspace.put(store, "/doomed.md", CONTENT)
        doomed_url = f"{base}/{store}/entries/{entry_id(doomed)}"
        problems += interrupted(
            page,
            "entry deleted",
            f"{doomed_url}/edit",
            lambda: workspace.http.delete(
                f"{API}/{store}/entries/{entry_id(doomed)}"
            ).raise_for_status(),
            ("link", f"Back to {store}"),
        )
    assert_none(problems)
