"""The console's Databricks pages in a real Chromium: actors -> sessions -> entries -> an entry;
create, edit (with and without a conflict, the description alone), delete, search; and
agent-written markup in actor ids, session ids, paths, descriptions and contents shown as text,
running nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kit.browser import (
    DESTRUCTIVE,
    WARNING,
    XSS_IMG,
    XSS_SCRIPT,
    Watched,
    background,
    check_sky_conflict,
    diff_rows,
    needs_chromium,
)
from kit.databricks import API, Workspace
from kit.servers import ServerProcess

pytestmark = needs_chromium


@pytest.fixture
def workspace(console_server: ServerProcess) -> Iterator[Workspace]:
    with Workspace(console_server) as workspace:
        yield workspace


def entry_id(entry: dict[str, Any]) -> str:
    return str(entry["name"].rsplit("/", 1)[1])


def get_entry(workspace: Workspace, store: str, entry: dict[str, Any]) -> dict[str, Any]:
    answer = workspace.http.get(f"{API}/{store}/entries/{entry_id(entry)}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_browse_actors_sessions_entries_and_an_entry(console: Any, workspace: Workspace) -> None:
    page = console
    store = workspace.create_store()
    workspace.put(store, "/facts.md", "the sky is blue\n", actor="alice", description="facts")
    workspace.put(store, "/plan.md", "step one\n", actor="alice", session="s-1")
    workspace.put(store, "/plan.md", "step two\n", actor="alice", session="s-2")
    workspace.put(store, "/bob.md", "bob's\n", actor="bob")
    page.reload()
    page.get_by_role("link", name=store, exact=True).click()
    page.get_by_role("heading", name=store, level=1).wait_for()
    actors = page.locator("ul.actors").inner_text()
    assert "alice" in actors and "3 entries" in actors and "bob" in actors and "1 entry" in actors
    page.get_by_role("link", name="alice", exact=True).click()
    page.get_by_role("heading", name="Actor alice").wait_for()
    sessions = page.locator("ul.sessions").inner_text()
    assert "Without a session" in sessions and "s-1" in sessions and "s-2" in sessions
    page.get_by_role("link", name="s-2", exact=True).click()
    rows = page.locator("table.entries tbody tr")
    rows.first.wait_for()
    assert rows.count() == 1 and "/plan.md" in rows.inner_text() and "s-2" in rows.inner_text()
    page.go_back()
    page.get_by_role("link", name="Without a session").click()
    rows.first.wait_for()
    assert rows.count() == 1 and "facts" in rows.inner_text()  # path and description
    page.get_by_role("link", name="/facts.md").click()
    page.get_by_role("heading", name="/facts.md", level=1).wait_for()
    assert page.locator("pre.content").inner_text() == "the sky is blue\n"
    assert page.locator(".entry-description").inner_text() == "facts"
    page.go_back()
    page.go_back()
    page.get_by_role("link", name="All entries of this actor").click()
    rows.first.wait_for()
    assert rows.count() == 3


def test_create_edit_describe_and_delete_an_entry(console: Any, workspace: Workspace) -> None:
    page = console
    store = workspace.create_store()
    page.goto(page.url + f"databricks/{store}/new")
    page.get_by_label("Actor").fill("carol")
    page.get_by_label("Session (optional)").fill("day-1")
    page.get_by_label("Path").fill("/notes/todo.md")
    page.get_by_label("Description").fill("what to do")
    page.get_by_label("Content").fill("buy milk\n")
    page.get_by_role("button", name="Create").click()
    page.get_by_text("Entry created.").wait_for()
    made = workspace.entries(store, actor="carol")[("day-1", "/notes/todo.md")]
    assert made["content"] == "buy milk\n" and made["description"] == "what to do"
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Content").fill("buy milk\nbuy bread\n")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved.").wait_for()
    assert page.locator("pre.content").inner_text() == "buy milk\nbuy bread\n"
    # the description alone: the content is not written (an API change of it stays)
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Description").fill("shopping")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved.").wait_for()
    after = get_entry(workspace, store, made)
    assert after["description"] == "shopping" and after["content"] == "buy milk\nbuy bread\n"
    page.get_by_role("link", name="Delete").click()
    page.get_by_role("button", name="Delete").click()
    page.get_by_text("Entry deleted.").wait_for()
    assert workspace.entries(store, actor="carol") == {}


def test_an_edit_conflict_shows_theirs_against_yours(console: Any, workspace: Workspace) -> None:
    page = console
    store = workspace.create_store()
    entry = workspace.put(store, "/facts.md", "sky: blue\ngrass: green\n")
    page.goto(page.url + f"databricks/{store}/entries/{entry_id(entry)}/edit")
    page.get_by_label("Content").fill("sky: blue\ngrass: green\nsea: salty\n")
    theirs = "sky: grey\ngrass: green\n"
    workspace.patch(store, entry, theirs)  # another writer, between load and save
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Someone changed this entry since you opened it").wait_for()
    check_sky_conflict(page)
    assert get_entry(workspace, store, entry)["content"] == theirs  # nothing overwritten
    assert background(page.get_by_role("button", name="Save over theirs")) == DESTRUCTIVE
    page.get_by_role("button", name="Save over theirs").click()
    page.get_by_text("Saved.").wait_for()
    assert get_entry(workspace, store, entry)["content"] == "sky: blue\ngrass: green\nsea: salty\n"
    # "Keep theirs" after another conflict leaves theirs
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Content").fill("mine\n")
    workspace.patch(store, entry, "theirs again\n")
    page.get_by_role("button", name="Save").click()
    page.get_by_role("link", name="Keep theirs").click()
    page.get_by_text("Kept their version").wait_for()
    assert background(page.get_by_role("status")) == WARNING  # yours was not saved
    assert page.locator("pre.content").inner_text() == "theirs again\n"


def test_a_delete_of_a_changed_entry_deletes_nothing(console: Any, workspace: Workspace) -> None:
    page = console
    store = workspace.create_store()
    entry = workspace.put(store, "/a.md", "one\n")
    page.goto(page.url + f"databricks/{store}/entries/{entry_id(entry)}/delete")
    workspace.patch(store, entry, "two\n")
    page.get_by_role("button", name="Delete").click()
    page.get_by_text("This entry changed since you opened this page").wait_for()
    assert get_entry(workspace, store, entry)["content"] == "two\n"


def test_search_is_scoped_to_an_actor_and_a_session(console: Any, workspace: Workspace) -> None:
    page = console
    store = workspace.create_store()
    workspace.put(store, "/okapi.md", "The okapi lives in the forest.\n", actor="alice")
    workspace.put(store, "/s.md", "An okapi in a session.\n", actor="alice", session="s-1")
    workspace.put(store, "/bob.md", "Bob saw an okapi too.\n", actor="bob")
    page.goto(page.url + f"databricks/{store}/actor?actor=alice")
    page.get_by_label("Search", exact=True).fill("okapi")
    page.get_by_role("button", name="Search").click()
    results = page.locator("ol.results")
    results.wait_for()
    text = results.inner_text()
    assert "/okapi.md" in text and "/s.md" in text and "/bob.md" not in text
    assert "The okapi lives in the forest." in text  # the snippet
    page.get_by_label("Session (optional)").fill("s-1")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("heading", name="1 result").wait_for()
    assert "/s.md" in results.inner_text()
    page.get_by_label("Actor").fill("")
    page.goto(page.url.replace("actor=alice", "actor="))
    page.get_by_text("Actor: required").wait_for()


def test_agent_written_markup_is_shown_as_text_and_runs_nothing(
    console: Any, workspace: Workspace, watched: Watched
) -> None:
    page = console
    store = workspace.create_store()
    actor = f"a{uuid.uuid4().hex[:6]}{XSS_IMG}"
    session = f"s{XSS_SCRIPT}"
    path = f"/x/{XSS_SCRIPT}.md"
    description = f"about {XSS_IMG}"
    content = f"{XSS_IMG}\n{XSS_SCRIPT}\n<b>bold</b> okapi\n"
    entry = workspace.put(
        store, path, content, actor=actor, session=session, description=description
    )
    page.goto(page.url + f"databricks/{store}")
    page.get_by_role("link", name=actor, exact=True).click()
    page.get_by_role("heading", name=f"Actor {actor}").wait_for()
    page.get_by_role("link", name=session, exact=True).click()
    page.get_by_role("link", name=path).wait_for()
    assert description in page.locator("table.entries").inner_text()
    page.get_by_role("link", name=path).click()
    page.get_by_role("heading", name=path, level=1).wait_for()
    assert page.locator("pre.content").inner_text() == content
    assert page.locator(".entry-description").inner_text() == description
    page.get_by_label("Search", exact=True).wait_for(state="detached")  # no form on an entry
    page.goto(page.url.split("/entries/")[0] + "/search?" + _query(actor, "okapi"))
    page.get_by_role("link", name=path).wait_for()
    assert "<b>bold</b> okapi" in page.locator("ol.results").inner_text()
    page.goto(page.url.split("/search")[0] + f"/entries/{entry_id(entry)}/edit")
    page.get_by_label("Content").fill(content + "mine\n")
    workspace.patch(store, entry, content + XSS_IMG)
    page.get_by_role("button", name="Save").click()  # the conflict's diff, escaped too
    page.get_by_text("Someone changed this entry").wait_for()
    assert ("4", "", "-", XSS_IMG) in diff_rows(page)  # theirs, as text
    assert page.evaluate("window.__pwned") is None  # no payload ran
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    assert watched.dialogs == [] and watched.errors == []


def _query(actor: str, q: str) -> str:
    from urllib.parse import urlencode

    return urlencode({"actor": actor, "q": q})
