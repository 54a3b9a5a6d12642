"""Live console pages in a real Chromium: a change made through either API while a store's
page and a memory's (an entry's) page are open reloads the listing and shows the notice on
the item; an edit page only shows the notice and keeps what was typed; what a change says
(an agent-written path) is shown as text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kit.browser import WARNING, Watched, api, background, needs_chromium, rendered_text, sign_in
from kit.databricks import Workspace
from kit.servers import ServerProcess

pytestmark = needs_chromium

XSS_IMG = "<img src=x onerror=window.__pwned=1;alert(1)>"
NOTICE = "#live-notice"


@pytest.fixture
def client(console_server: ServerProcess) -> Iterator[httpx.Client]:
    with api(console_server.base_url, console_server.api_key) as client:
        yield client


@pytest.fixture
def workspace(console_server: ServerProcess) -> Iterator[Workspace]:
    with Workspace(console_server) as workspace:
        yield workspace


@pytest.fixture
def console(page: Any, console_server: ServerProcess) -> Any:
    return sign_in(page, console_server.base_url, console_server.api_key)


def second_page(page: Any) -> Any:
    """Another tab of the same browser (signed in too)."""
    other = page.context.new_page()
    return other


def mark(page: Any) -> None:
    """A mark a reload wipes out (set through the DevTools protocol, which the page's CSP does
    not govern; ``wait_for_function`` would compile its predicate in the page, which the CSP
    refuses with a console error when a reload races it)."""
    page.evaluate("document.body.setAttribute('data-unreloaded', '1')")


def wait_reloaded(page: Any) -> None:
    page.locator("body[data-unreloaded]").wait_for(state="detached")


def unreloaded(page: Any) -> bool:
    return bool(page.locator("body[data-unreloaded]").count() == 1)


def test_memory_stores_pages_learn_of_changes(
    console: Any, client: httpx.Client, watched: Watched
) -> None:
    made = client.post("/v1/memory_stores", json={"name": "Live"}).json()
    store_id = made["id"]
    memories = f"/v1/memory_stores/{store_id}/memories"
    memory = client.post(memories, json={"path": "/a.md", "content": "one\n"}).json()
    store_page = console
    store_page.goto(store_page.url + f"stores/{store_id}")
    memory_page = second_page(store_page)
    watched.attach(memory_page)
    memory_page.goto(store_page.url + f"/memories/{memory['id']}")
    memory_page.locator("body[data-live=open]").wait_for(state="attached")
    mark(store_page)
    mark(memory_page)
    # another memory: the store's listing reloads; the memory's page has nothing to say
    client.post(memories, json={"path": f"/{XSS_IMG}.md", "content": "two\n"})
    wait_reloaded(store_page)
    store_page.get_by_role("link", name=f"{XSS_IMG}.md").wait_for()
    # this memory: its page shows the notice (and is not reloaded)
    client.post(f"{memories}/{memory['id']}", json={"content": "one, changed\n"})
    notice = memory_page.locator(NOTICE)
    notice.wait_for()
    assert notice.inner_text() == "Changed since you opened it: /a.md was modified. Reload"
    assert background(notice) == WARNING  # not green like "Saved.": the page is stale
    assert unreloaded(memory_page)
    assert rendered_text(memory_page) == "one"  # nothing replaced
    notice.get_by_role("link", name="Reload").click()
    memory_page.get_by_text("one, changed").wait_for()
    assert store_page.evaluate("window.__pwned") is None
    assert watched.dialogs == [] and watched.errors == []


def test_an_edit_page_only_shows_the_notice_and_keeps_the_typed_text(
    console: Any, client: httpx.Client, watched: Watched
) -> None:
    page = console
    store_id = client.post("/v1/memory_stores", json={"name": "Live edit"}).json()["id"]
    memories = f"/v1/memory_stores/{store_id}/memories"
    path = f"/{XSS_IMG}.md"
    memory = client.post(memories, json={"path": path, "content": "theirs\n"}).json()
    page.goto(page.url + f"stores/{store_id}/memories/{memory['id']}/edit")
    page.get_by_label("Content").fill("mine, typed\n")
    client.post(f"{memories}/{memory['id']}", json={"content": "theirs, changed\n"})
    notice = page.locator(NOTICE)
    notice.wait_for()
    assert notice.locator(".live-what").inner_text() == f"{path} was modified"  # as text
    assert page.get_by_label("Content").input_value() == "mine, typed\n"
    page.get_by_role("button", name="Save").click()  # and the save still meets the conflict
    page.get_by_text("Someone changed this memory since you opened it").wait_for()
    assert page.evaluate("window.__pwned") is None
    assert watched.dialogs == [] and watched.errors == []


def test_databricks_pages_learn_of_changes(
    console: Any, workspace: Workspace, watched: Watched
) -> None:
    store = workspace.create_store()
    entry = workspace.put(store, "/a.md", "one\n", actor="alice")
    entry_id = entry["name"].rsplit("/", 1)[1]
    store_page = console
    root = store_page.url
    store_page.goto(root + f"databricks/{store}")
    entry_page = second_page(store_page)
    watched.attach(entry_page)
    entry_page.goto(root + f"databricks/{store}/entries/{entry_id}/edit")
    entry_page.get_by_label("Content").fill("mine\n")
    mark(store_page)
    workspace.put(store, f"/{XSS_IMG}.md", "x\n", actor="bob")  # a new actor
    wait_reloaded(store_page)
    store_page.get_by_role("link", name="bob", exact=True).wait_for()
    mark(store_page)
    workspace.patch(store, entry, "theirs\n")
    notice = entry_page.locator(NOTICE)
    notice.wait_for()
    wait_reloaded(store_page)  # every change of the store is one its listing shows
    assert notice.locator(".live-what").inner_text() == "/a.md of alice was updated"
    assert entry_page.get_by_label("Content").input_value() == "mine\n"
    # the store's deletion reaches every page that shows it
    mark(store_page)
    assert workspace.http.delete(f"/api/2.0/agents/memory-stores/{store}").status_code == 200
    wait_reloaded(store_page)
    store_page.get_by_text("memory store").first.wait_for()  # its 404 page
    assert entry_page.evaluate("window.__pwned") is None
    assert watched.dialogs == [] and watched.errors == []
