"""The console's history pages in a real Chromium: compare two versions, restore an older one
and a deleted memory, redact a past version (confirmed first; never the head), the store as of
a moment, agent-written markup shown as text, and cross-site posts to restore and redact
changing nothing."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import httpx

from kit.browser import XSS_IMG, XSS_SCRIPT, Watched, diff_rows, needs_chromium, rendered_text
from kit.servers import ServerProcess

pytestmark = needs_chromium


class Store:
    """A store made through the API, and what the tests ask the API about it."""

    def __init__(self, client: httpx.Client, name: str) -> None:
        self.client = client
        made = client.post("/v1/memory_stores", json={"name": name})
        assert made.status_code == 200, made.text
        self.id = str(made.json()["id"])
        self.base = f"/v1/memory_stores/{self.id}"

    def create(self, path: str, content: str) -> str:
        made = self.client.post(f"{self.base}/memories", json={"path": path, "content": content})
        assert made.status_code == 200, made.text
        return str(made.json()["id"])

    def update(self, memory_id: str, content: str) -> None:
        done = self.client.post(f"{self.base}/memories/{memory_id}", json={"content": content})
        assert done.status_code == 200, done.text

    def delete(self, memory_id: str) -> None:
        assert self.client.delete(f"{self.base}/memories/{memory_id}").status_code in (200, 204)

    def memory(self, memory_id: str) -> httpx.Response:
        return self.client.get(f"{self.base}/memories/{memory_id}")

    def versions(self, memory_id: str) -> list[dict[str, Any]]:
        """Newest first, with content."""
        listed = self.client.get(
            f"{self.base}/memory_versions", params={"memory_id": memory_id, "view": "full"}
        )
        assert listed.status_code == 200, listed.text
        data: list[dict[str, Any]] = listed.json()["data"]
        return data

    def url(self, console: Any, rest: str = "") -> str:
        return f"{console.url.split('/console/')[0]}/console/stores/{self.id}{rest}"


def open_version(page: Any, store: Store, memory_id: str, version_id: str) -> None:
    page.goto(store.url(page, f"/memories/{memory_id}/history"))
    page.get_by_role("heading", name="History of").wait_for()
    page.locator(f'a[href$="/versions/{version_id}"]').click()
    page.get_by_role("heading", level=1).filter(has_text=" at ").wait_for()


def test_compare_two_versions(console: Any, client: httpx.Client) -> None:
    page = console
    store = Store(client, "Compare")
    memory_id = store.create("/plan.md", "step one\nstep two\n")
    store.update(memory_id, "step one\nstep 2\nstep three\n")
    page.goto(store.url(page))
    page.get_by_role("link", name="plan.md", exact=True).click()
    page.get_by_role("link", name="History", exact=True).click()
    page.get_by_role("heading", name="History of /plan.md").wait_for()
    rows = page.locator("table.versions tbody tr")
    assert rows.count() == 2
    assert "modified" in rows.nth(0).inner_text() and "created" in rows.nth(1).inner_text()
    assert "you" in rows.nth(0).locator("td.who").inner_text()  # the signed-in key wrote it
    newest, oldest = (v["id"] for v in store.versions(memory_id))
    page.get_by_label(f"From {oldest}").check()
    page.get_by_label(f"To {newest}").check()
    page.get_by_role("button", name="Compare").click()
    page.get_by_role("heading", name="Compare versions of /plan.md").wait_for()
    assert diff_rows(page) == [
        ("", "", "", "@@ -1,2 +1,3 @@"),
        ("1", "1", "", "step one"),  # context, numbered on both sides
        ("2", "", "-", "step two"),
        ("", "2", "+", "step 2"),
        ("", "3", "+", "step three"),
    ]
    # in the changed line only the changed word is marked; a new line is no edit of an old one
    assert page.locator("table.diff del").all_inner_texts() == ["two"]
    assert page.locator("table.diff ins").all_inner_texts() == ["2"]
    page.get_by_role("link", name="Split").click()
    page.locator("table.diff.split").wait_for()
    assert diff_rows(page, "split") == [
        ("", "", "", "@@ -1,2 +1,3 @@"),
        ("1", "step one", "1", "step one"),
        ("2", "step two", "2", "step 2"),  # the old line beside the one that replaced it
        ("", "", "3", "step three"),
    ]
    assert page.locator("table.diff del").all_inner_texts() == ["two"]
    page.get_by_role("link", name="Unified").click()
    page.locator("table.diff.unified").wait_for()


def test_history_fits_a_phone(console: Any, client: httpx.Client) -> None:
    page = console
    store = Store(client, "Phone")
    memory_id = store.create("/a/rather/long/path/to/a/memory/of/the/team.md", "one\n")
    store.update(memory_id, "two\n")
    page.set_viewport_size({"width": 390, "height": 760})
    for rest in (f"/memories/{memory_id}/history", "/history"):
        page.goto(store.url(page, rest))
        page.get_by_role("heading", name="History of").wait_for()
        # nothing wider than the screen: no sideways scrolling, in the table or the page
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        wrap = page.locator(".table-wrap")
        assert wrap.evaluate("e => e.scrollWidth <= e.clientWidth")


def test_restore_an_older_version(console: Any, client: httpx.Client) -> None:
    page = console
    store = Store(client, "Restore")
    memory_id = store.create("/facts.md", "alpha\n")
    store.update(memory_id, "beta\n")
    first = store.versions(memory_id)[-1]["id"]
    open_version(page, store, memory_id, first)
    assert rendered_text(page) == "alpha"
    page.get_by_role("link", name="Compare with the current version").click()
    assert diff_rows(page)[1:] == [("1", "", "-", "alpha"), ("", "1", "+", "beta")]
    page.go_back()
    page.get_by_role("button", name="Restore").wait_for()
    store.update(memory_id, "gamma\n")  # another writer, after the page loaded
    page.get_by_role("button", name="Restore").click()
    page.get_by_text("This memory changed since you opened this page").wait_for()
    assert store.memory(memory_id).json()["content"] == "gamma\n"  # nothing overwritten
    page.reload()
    page.get_by_role("button", name="Restore").click()
    page.get_by_text("Restored").wait_for()
    assert rendered_text(page) == "alpha"
    versions = store.versions(memory_id)
    assert [v["operation"] for v in versions] == ["modified", "modified", "modified", "created"]
    assert versions[0]["content"] == "alpha\n"
    assert versions[0]["created_by"]["type"] == "api_actor"  # the signed-in key


def test_restore_a_deleted_memory(console: Any, client: httpx.Client) -> None:
    page = console
    store = Store(client, "Deleted")
    memory_id = store.create("/gone.md", "keep me\n")
    created = store.versions(memory_id)[0]["id"]
    store.delete(memory_id)
    page.goto(store.url(page, "/history"))
    page.get_by_role("link", name=f"History of memory {memory_id}").first.click()
    page.get_by_text("This memory was deleted").wait_for()
    page.locator(f'a[href$="/versions/{created}"]').click()
    page.get_by_text("Creates the memory again at /gone.md").wait_for()
    page.get_by_role("button", name="Restore").click()
    page.get_by_text("Restored").wait_for()
    page.get_by_role("heading", name="/gone.md", level=1).wait_for()
    new_id = page.url.split("/memories/")[1].split("?")[0]
    assert new_id != memory_id and store.memory(new_id).json()["content"] == "keep me\n"
    # the path is taken now: a second restore is refused, naming the memory there
    page.go_back()
    page.reload()
    page.get_by_role("button", name="Restore").click()
    page.get_by_text("The path /gone.md is taken by another memory now").wait_for()
    assert page.get_by_role("link", name=f"memory {new_id}").is_visible()
    listed = client.get(f"{store.base}/memories").json()["data"]
    assert [m["id"] for m in listed] == [new_id]


def test_redact_a_past_version_confirmed_and_never_the_head(
    console: Any, client: httpx.Client
) -> None:
    page = console
    store = Store(client, "Secrets")
    memory_id = store.create("/creds.md", "password: hunter2\n")
    store.update(memory_id, "password: (removed)\n")
    head, leaked = (v["id"] for v in store.versions(memory_id))
    open_version(page, store, memory_id, head)
    assert page.get_by_role("link", name="Redact", exact=True).count() == 0  # the head: no button
    open_version(page, store, memory_id, leaked)
    assert "hunter2" in rendered_text(page)
    page.get_by_role("link", name="Redact", exact=True).click()
    page.get_by_role("heading", name="Redact a version of /creds.md?").wait_for()
    page.get_by_role("button", name="Redact").click()  # not confirmed: the form stays unsent
    assert page.locator("#confirm").evaluate("box => box.validity.valueMissing") is True
    assert page.url.endswith("/redact")
    assert store.versions(memory_id)[1]["content"] == "password: hunter2\n"
    page.get_by_label("Erase this version's content for good").check()
    page.get_by_role("button", name="Redact").click()
    page.get_by_text("Redacted: this version's content is gone.").wait_for()
    assert "hunter2" not in page.content()
    gone = client.get(f"{store.base}/memory_versions/{leaked}").json()
    assert gone["content"] is None and gone["redacted_by"]["type"] == "api_actor"
    # the head's confirmation page reached anyway: the server's refusal is shown
    page.goto(page.url.split("/versions/")[0] + f"/versions/{head}/redact")
    page.get_by_label("Erase this version's content for good").check()
    page.get_by_role("button", name="Redact").click()
    page.get_by_text("cannot be redacted").wait_for()
    assert store.memory(memory_id).json()["content"] == "password: (removed)\n"


def test_the_store_as_of_a_moment(console: Any, client: httpx.Client) -> None:
    page = console
    store = Store(client, "Moments")
    edited = store.create("/notes/todo.md", "before\n")
    moment = store.versions(edited)[0]["created_at"]
    store.update(edited, "after\n")
    store.delete(edited)
    store.create("/later.md", "not yet\n")
    page.goto(store.url(page, "/history"))
    page.get_by_role("link", name="Show the store as of a moment").click()
    page.get_by_label("Show the store as of").fill(moment)
    page.get_by_role("button", name="Show").click()
    page.get_by_role("heading", name="1 memory then").wait_for()
    assert page.get_by_role("link", name="/later.md").count() == 0
    page.get_by_role("link", name="/notes/todo.md").click()
    assert rendered_text(page) == "before"
    page.go_back()
    page.get_by_label("Show the store as of").fill("2000-01-01")
    page.get_by_role("button", name="Show").click()
    page.get_by_role("heading", name="0 memories then").wait_for()


def test_agent_written_markup_in_history_is_text(
    console: Any, client: httpx.Client, watched: Watched
) -> None:
    page = console
    store = Store(client, "Hostile history")
    path = f"/x/{XSS_SCRIPT}.md"
    memory_id = store.create(path, f"{XSS_IMG}\n")
    store.update(memory_id, f"{XSS_SCRIPT}\n")
    newest, oldest = (v["id"] for v in store.versions(memory_id))
    page.goto(store.url(page, "/history"))
    assert page.locator("table.versions").get_by_text(path).count() == 2
    page.goto(store.url(page, f"/memories/{memory_id}/history"))
    page.get_by_role("heading", name=f"History of {path}").wait_for()
    page.goto(store.url(page, f"/memories/{memory_id}/versions/{oldest}"))
    assert rendered_text(page) == XSS_IMG
    compare = f"/memories/{memory_id}/history/compare?from={oldest}&to={newest}"
    page.goto(store.url(page, compare))
    assert diff_rows(page)[1:] == [("1", "", "-", XSS_IMG), ("", "1", "+", XSS_SCRIPT)]
    page.get_by_role("link", name="Split").click()
    page.locator("table.diff.split").wait_for()
    assert page.evaluate("window.__pwned") is None
    assert diff_rows(page, "split")[1:] == [("1", XSS_IMG, "1", XSS_SCRIPT)]
    page.goto(store.url(page, "/as-of?at=2100-01-01"))
    page.get_by_role("link", name=path).wait_for()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    assert watched.dialogs == [] and watched.errors == []


def test_cross_site_restore_and_redact_change_nothing(
    console: Any, client: httpx.Client, console_server: ServerProcess
) -> None:
    page = console
    store = Store(client, "Cross-site")
    memory_id = store.create("/target.md", "first\n")
    store.update(memory_id, "second\n")
    head, old = (v["id"] for v in store.versions(memory_id))
    version = f"{store.url(page, '')}/memories/{memory_id}/versions/{old}"
    evil = "http://evil.test/"
    for action, fields in (
        ("restore", '<input name="precondition" value="">'),
        ("redact", '<input name="confirm" value="erase">'),
    ):
        body = (
            f'<form method="post" action="{version}/{action}">{fields}'
            '<input name="csrf" value="guess"><button id="go">go</button></form>'
        )
        page.route(evil, planted(body))
        page.goto(evil)
        with page.expect_response(re.compile(f"/{action}$")) as answer:
            page.click("#go")
        assert answer.value.status == 403  # the server answered, and refused
        page.unroute(evil)
    versions = store.versions(memory_id)
    assert [v["id"] for v in versions] == [head, old]
    assert versions[1]["content"] == "first\n" and versions[1]["redacted_at"] is None
    assert store.memory(memory_id).json()["content"] == "second\n"


def planted(body: str) -> Any:
    """A route handler answering with ``body``: another site's page."""

    def fulfill(route: Any) -> None:
        route.fulfill(content_type="text/html", body=body)

    return fulfill


def test_history_rows_show_relative_times_lines_changed_and_writers_on_one_line(
    console: Any, client: httpx.Client
) -> None:
    page = console
    page.set_viewport_size({"width": 1400, "height": 800})
    store = Store(client, "Rows")
    memory_id = store.create("/plan.md", "one\ntwo\n")
    store.update(memory_id, "one\n2\nthree\n")
    newest, oldest = store.versions(memory_id)
    for rest in (f"/memories/{memory_id}/history", "/history"):
        page.goto(store.url(page, rest))
        page.get_by_role("heading", name="History of").wait_for()
        # the page takes the window's width, past the 60rem of the other pages
        assert page.locator("main").evaluate("e => e.clientWidth") > 1300
        rows = page.locator("table.versions tbody tr")
        for row, version in zip(rows.all(), (newest, oldest), strict=True):
            when = row.locator("td.when time")
            moment = datetime.fromisoformat(version["created_at"]).astimezone(UTC)
            assert when.get_attribute("datetime") == f"{moment:%Y-%m-%dT%H:%M:%SZ}"
            assert when.get_attribute("title") == f"{moment:%Y-%m-%d %H:%M:%S} UTC"
            assert when.inner_text() == f"{moment:%b} {moment.day}, {moment:%H:%M}"
            assert row.locator("td.when .ago").inner_text() == "just now"
            writer = row.locator("td.who .writer")
            assert writer.inner_text() == "you"  # the signed-in key wrote both
            assert writer.evaluate("e => e.getClientRects().length") == 1  # one line
        assert [" ".join(c.split()) for c in rows.locator("td.lines").all_inner_texts()] == [
            "+2 −1",
            "+2 −0",
        ]
        # the writer leads to the store's history of that key's versions
        rows.first.locator("td.who .writer").click()
        page.get_by_label("Key id").wait_for()
        assert page.get_by_label("Key id").input_value().startswith("apikey_")
        assert page.locator("table.versions tbody tr").count() >= 2


def fields_beside_their_labels(page: Any) -> list[str]:
    """What is wrong in a filter bar: a label not beside its field, or controls of one line
    (same top) whose boxes differ in height."""
    return list(
        page.evaluate(
            """() => {
            const bad = [];
            const bar = document.querySelector("form.filter-bar");
            if (!bar) return ["no filter bar"];
            for (const label of bar.querySelectorAll("label")) {
                const field = document.getElementById(label.htmlFor).getBoundingClientRect();
                const own = label.getBoundingClientRect();
                const middle = (own.top + own.bottom) / 2;
                if (middle < field.top || middle > field.bottom || own.right > field.left)
                    bad.push(`${label.textContent} is not left of its field`);
            }
            const controls = [...bar.querySelectorAll("input, select, button")];
            for (const a of controls) for (const b of controls) {
                const ra = a.getBoundingClientRect(), rb = b.getBoundingClientRect();
                if (Math.abs(ra.top - rb.top) < 8 && (Math.abs(ra.top - rb.top) > 1
                        || Math.abs(ra.height - rb.height) > 1))
                    bad.push(`${a.name || a.textContent} and ${b.name || b.textContent} differ`);
            }
            if (document.documentElement.scrollWidth > innerWidth) bad.push("scrolls sideways");
            return bad;
        }"""
        )
    )


def test_the_filter_bars_keep_labels_fields_and_buttons_on_one_line(
    console: Any, client: httpx.Client
) -> None:
    page = console
    store = Store(client, "Filters")
    store.create("/a.md", "okapi\n")
    for width in (1000, 390):
        page.set_viewport_size({"width": width, "height": 800})
        for rest in ("/history", "/search?q=okapi"):
            page.goto(store.url(page, rest))
            assert fields_beside_their_labels(page) == [], (width, rest)
