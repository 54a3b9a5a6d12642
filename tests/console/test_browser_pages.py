"""The console's pages in a real Chromium: browse, create, edit (and its conflict), rename,
delete, search, store settings; agent-written markup shown as text and run nowhere; a form
posted from another site changing nothing."""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from typing import Any

import httpx

from kit.browser import (
    DESTRUCTIVE,
    PRIMARY,
    SUCCESS,
    XSS_IMG,
    XSS_SCRIPT,
    Watched,
    background,
    check_sky_conflict,
    content_lines,
    diff_rows,
    needs_chromium,
    rendered_text,
)
from kit.servers import ServerProcess

pytestmark = needs_chromium


def new_store(client: httpx.Client, name: str, description: str = "") -> str:
    made = client.post("/v1/memory_stores", json={"name": name, "description": description})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def new_memory(client: httpx.Client, store_id: str, path: str, content: str) -> dict[str, Any]:
    made = client.post(
        f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content}
    )
    assert made.status_code == 200, made.text
    result: dict[str, Any] = made.json()
    return result


def content_of(client: httpx.Client, store_id: str, memory_id: str) -> str:
    got = client.get(f"/v1/memory_stores/{store_id}/memories/{memory_id}")
    assert got.status_code == 200, got.text
    return str(got.json()["content"])


def test_browse_stores_to_a_store_to_a_memory(
    console: Any, client: httpx.Client, watched: Watched
) -> None:
    page = console
    store_id = new_store(client, "Browse", "notes of the team")
    new_memory(client, store_id, "/projects/alpha/plan.md", "step one\nstep two\n")
    new_memory(client, store_id, "/readme.md", "\nstarts with a blank line")
    page.reload()
    card = page.get_by_role("listitem").filter(has_text="notes of the team")
    assert "2 of 2,000 memories" in card.inner_text()
    page.get_by_role("link", name="Browse", exact=True).click()
    page.get_by_role("heading", name="Browse", level=1).wait_for()
    assert page.get_by_text("projects/", exact=True).is_visible()  # an open folder
    page.get_by_text("alpha/", exact=True).click()  # folders close...
    assert not page.get_by_role("link", name="plan.md").is_visible()
    page.get_by_text("alpha/", exact=True).click()  # ...and open again
    page.get_by_role("link", name="plan.md").click()
    page.get_by_role("heading", name="/projects/alpha/plan.md", level=1).wait_for()
    assert rendered_text(page) == "step one step two"  # Markdown: one paragraph
    for action in ("Edit", "Rename", "Delete", "History"):
        assert page.get_by_role("link", name=action, exact=True).is_visible()
    page.go_back()
    page.get_by_role("link", name="readme.md").click()
    page.get_by_role("link", name="Raw").click()
    # a leading blank line is a line of its own (a <pre> dropped one after the tag)
    assert content_lines(page) == [("1", ""), ("2", "starts with a blank line")]
    assert watched.dialogs == [] and watched.errors == []


def test_the_tree_shows_names_in_their_folder_with_size_and_last_change(
    console: Any, client: httpx.Client, console_server: ServerProcess
) -> None:
    page = console
    store_id = new_store(client, "Tree view")
    new_memory(client, store_id, "/a.md", "hi")
    new_memory(client, store_id, "/projects/notes.md", "")
    plan = new_memory(client, store_id, "/projects/alpha/plan.md", "x" * 1234)
    page.goto(f"{console_server.base_url}/console/stores/{store_id}")
    tree = page.locator(".store-tree")
    # folders first, each memory by its name in its folder
    names = tree.locator("summary, li.file .name > a").all_inner_texts()
    assert names == ["projects/", "alpha/", "plan.md", "notes.md", "a.md"]
    assert tree.get_by_text("/projects/alpha/plan.md").count() == 0
    link = tree.get_by_role("link", name="plan.md")
    assert link.get_attribute("href") == f"/console/stores/{store_id}/memories/{plan['id']}"
    row = tree.locator("li.file").filter(has_text="plan.md")
    assert " ".join(row.inner_text().split()) == "plan.md 1.2 kB changed just now by you"
    for part in (".size", "time", ".writer"):
        assert row.locator(part).is_visible()
    when = row.locator("time")
    changed = datetime.fromisoformat(when.get_attribute("datetime") or "")
    assert abs((datetime.now(UTC) - changed).total_seconds()) < 60
    assert when.get_attribute("title") == changed.strftime("%Y-%m-%d %H:%M:%S UTC")


def test_the_use_panel_quotes_a_hostile_store_name_and_shows_no_key(
    console: Any, client: httpx.Client, console_server: ServerProcess, watched: Watched
) -> None:
    page = console
    name = f"it's {XSS_IMG} $(touch /tmp/pwned)"
    store_id = new_store(client, name)
    page.goto(f"{console_server.base_url}/console/stores/{store_id}")
    panel = page.get_by_role("region", name="Use this store")
    quoted = shlex.quote(name)
    assert panel.locator("pre.commands").inner_text().splitlines() == [
        f"export ANTHROPIC_BASE_URL={console_server.base_url}",
        f"memfs mount {quoted} ~/memory",
        f"memfs mcp {quoted}",
        f"memfs mcp --print-config {quoted}",
    ]
    assert shlex.split(f"memfs mcp {quoted}")[2] == name  # a shell reads the name back whole
    assert console_server.api_key not in page.content()
    assert page.evaluate("window.__pwned") is None and page.locator("img").count() == 0
    assert watched.dialogs == [] and watched.errors == []


def test_create_edit_rename_and_delete_a_memory(console: Any, client: httpx.Client) -> None:
    page = console
    store_id = new_store(client, "Writes")
    page.goto(page.url + f"stores/{store_id}")
    page.get_by_role("link", name="New memory").click()
    page.get_by_label("Path").fill("/todo.md")
    page.get_by_label("Content").fill("buy milk\n")
    page.get_by_role("button", name="Create").click()
    page.get_by_text("Memory created.").wait_for()
    memory_id = page.url.split("/memories/")[1].split("?")[0]
    assert content_of(client, store_id, memory_id) == "buy milk\n"

    page.get_by_role("link", name="Edit", exact=True).click()
    assert page.get_by_label("Content").input_value() == "buy milk\n"
    page.get_by_label("Content").fill("buy milk\nbuy bread\n")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved.").wait_for()
    assert content_of(client, store_id, memory_id) == "buy milk\nbuy bread\n"  # LF, not CR LF
    versions = client.get(f"/v1/memory_stores/{store_id}/memory_versions").json()["data"]
    assert versions[0]["created_by"]["type"] == "api_actor"  # attributed to the key

    page.get_by_role("link", name="Rename", exact=True).click()
    page.get_by_label("New path").fill("bad")
    page.get_by_role("button", name="Rename").click()
    page.get_by_text("path: path must start with '/'").wait_for()  # the API's message
    page.get_by_label("New path").fill("/done/todo.md")
    page.get_by_role("button", name="Rename").click()
    page.get_by_role("heading", name="/done/todo.md", level=1).wait_for()

    page.get_by_role("link", name="Delete", exact=True).click()
    page.get_by_role("button", name="Delete").click()
    page.get_by_text("Memory deleted.").wait_for()
    gone = client.get(f"/v1/memory_stores/{store_id}/memories/{memory_id}")
    assert gone.status_code == 404


def test_an_edit_conflict_shows_a_diff_and_overwrites_nothing(
    console: Any, client: httpx.Client
) -> None:
    page = console
    store_id = new_store(client, "Conflict")
    memory = new_memory(client, store_id, "/facts.md", "sky: blue\ngrass: green\n")
    page.goto(page.url + f"stores/{store_id}/memories/{memory['id']}/edit")
    page.get_by_label("Content").fill("sky: blue\ngrass: green\nsea: salty\n")
    assert background(page.get_by_role("button", name="Save")) == PRIMARY
    theirs = "sky: grey\ngrass: green\n"
    changed = client.post(
        f"/v1/memory_stores/{store_id}/memories/{memory['id']}", json={"content": theirs}
    )
    assert changed.status_code == 200  # another writer, between load and save
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Someone changed this memory since you opened it").wait_for()
    check_sky_conflict(page)
    assert content_of(client, store_id, memory["id"]) == theirs  # nothing overwritten
    assert page.get_by_role("link", name="Keep theirs").is_visible()
    # overwriting theirs looks like what it is; keeping theirs is no main action either
    assert background(page.get_by_role("button", name="Save over theirs")) == DESTRUCTIVE
    assert background(page.get_by_role("link", name="Keep theirs")) not in (DESTRUCTIVE, PRIMARY)
    page.get_by_role("button", name="Save over theirs").click()
    page.get_by_text("Saved.").wait_for()
    assert background(page.get_by_role("status")) == SUCCESS
    assert content_of(client, store_id, memory["id"]) == "sky: blue\ngrass: green\nsea: salty\n"


def test_search_shows_paths_and_snippets(console: Any, client: httpx.Client) -> None:
    page = console
    store_id = new_store(client, "Searchable")
    new_memory(client, store_id, "/animals/okapi.md", "The okapi lives in the forest.\n")
    new_memory(client, store_id, "/animals/cat.md", "A cat sleeps.\n")
    page.goto(page.url + f"stores/{store_id}")
    page.get_by_label("Search").fill("okapi")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("heading", name="1 result").wait_for()
    results = page.locator("ol.results")
    assert results.get_by_role("link", name="/animals/okapi.md").is_visible()
    assert "The okapi lives in the forest." in results.inner_text()


def test_store_settings_edit_archive_and_delete(console: Any, client: httpx.Client) -> None:
    page = console
    page.get_by_label("Name", exact=True).fill("Admin me")
    page.get_by_role("button", name="Create store").click()
    page.get_by_text("Store created.").wait_for()
    store_id = page.url.split("/stores/")[1].split("?")[0]
    page.get_by_role("link", name="Settings").click()
    page.get_by_label("Description").fill("now described")
    page.get_by_label("Metadata key 1").fill("team")
    page.get_by_label("Metadata value 1").fill("search")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Store saved.").wait_for()
    store = client.get(f"/v1/memory_stores/{store_id}").json()
    assert store["description"] == "now described" and store["metadata"] == {"team": "search"}

    page.get_by_role("link", name="Settings").click()
    page.get_by_label("I understand").check()
    page.get_by_role("button", name="Archive store").click()
    page.get_by_text("Store archived").wait_for()
    assert client.get(f"/v1/memory_stores/{store_id}").json()["archived_at"] is not None

    page.get_by_role("link", name="Settings").click()
    page.get_by_label("Type the store's name to confirm").fill("Admin m")
    page.get_by_role("button", name="Delete store").click()
    page.get_by_text("nothing was deleted").wait_for()
    assert client.get(f"/v1/memory_stores/{store_id}").status_code == 200
    page.get_by_label("Type the store's name to confirm").fill("Admin me")
    page.get_by_role("button", name="Delete store").click()
    page.get_by_text("Store deleted.").wait_for()
    assert client.get(f"/v1/memory_stores/{store_id}").status_code == 404


def test_agent_written_markup_is_shown_as_text_and_runs_nothing(
    console: Any, client: httpx.Client, watched: Watched
) -> None:
    page = console
    store_id = new_store(client, f"store {XSS_IMG}", f"about {XSS_SCRIPT}")
    path = f"/x/{XSS_SCRIPT}.md"
    content = f"{XSS_IMG}\n{XSS_SCRIPT}\n<b>bold</b> okapi\n"
    memory = new_memory(client, store_id, path, content)
    page.reload()
    page.get_by_text(f"about {XSS_SCRIPT}").wait_for()  # the description, as text
    page.get_by_role("link", name=f"store {XSS_IMG}", exact=True).click()
    page.get_by_role("heading", name=f"store {XSS_IMG}", level=1).wait_for()
    # its name in its folder: "</script>" holds a "/", so "<script>…<" is a folder
    page.get_by_text("<script>window.__pwned=2;alert(2)</", exact=True).wait_for()
    page.get_by_role("link", name="script>.md", exact=True).click()
    page.get_by_role("heading", name=path, level=1).wait_for()
    assert rendered_text(page) == content.rstrip().replace("\n", " ")  # raw HTML: text
    page.get_by_role("link", name="Raw").click()
    assert content_lines(page) == [("1", XSS_IMG), ("2", XSS_SCRIPT), ("3", "<b>bold</b> okapi")]
    page.goto(f"{page.url.split('/memories/')[0]}/search?q=okapi")
    page.get_by_role("link", name=path).wait_for()
    assert "<b>bold</b> okapi" in page.locator("ol.results").inner_text()  # the snippet
    page.goto(page.url.split("/search")[0] + f"/memories/{memory['id']}/edit")
    client.post(
        f"/v1/memory_stores/{store_id}/memories/{memory['id']}",
        json={"content": content + XSS_IMG},
    )
    page.get_by_role("button", name="Save").click()  # the conflict's diff, escaped too
    page.get_by_text("Someone changed this memory").wait_for()
    assert ("4", "", "-", XSS_IMG) in diff_rows(page)  # theirs, as text
    assert page.evaluate("window.__pwned") is None  # neither payload ran
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    assert watched.dialogs == [] and watched.errors == []


def test_a_form_posted_from_another_site_changes_nothing(
    console: Any, client: httpx.Client, console_server: ServerProcess
) -> None:
    page = console
    before = {s["name"] for s in client.get("/v1/memory_stores").json()["data"]}
    evil = "http://evil.test/"
    page.route(
        evil,
        lambda route: route.fulfill(
            content_type="text/html",
            body=(
                f'<form method="post" action="{console_server.base_url}/console/stores">'
                '<input name="name" value="planted"><input name="csrf" value="guess">'
                '<button id="go">go</button></form>'
            ),
        ),
    )
    page.goto(evil)
    with page.expect_response(re.compile(r"/console/stores$")) as answer:
        page.click("#go")
    assert answer.value.status == 403  # the server answered, and refused
    after = {s["name"] for s in client.get("/v1/memory_stores").json()["data"]}
    assert after == before


MARKDOWN = """# Shopping

- milk
- bread

```
make test
```

| item | qty |
|:-----|----:|
| milk |   2 |

[the docs](https://example.com/docs) and [a trap](javascript:window.__pwned=3) or
<javascript:window.__pwned=4>

<script>console.error("script ran")</script>

![a logo](https://example.com/logo.png)
"""


def test_a_memory_is_rendered_as_markdown_safely_and_raw_with_numbers(
    console: Any, client: httpx.Client, watched: Watched
) -> None:
    page = console
    store_id = new_store(client, "Markdown")
    memory = new_memory(client, store_id, "/lists/shopping.md", MARKDOWN)
    remote: list[str] = []
    page.on(
        "request",
        lambda request: remote.append(request.url) if "example.com" in request.url else None,
    )
    page.goto(page.url + f"stores/{store_id}/memories/{memory['id']}")
    rendered = page.locator("div.markdown")
    # a heading (below the page's h1 and "Content" h2), a list, a code block
    rendered.get_by_role("heading", name="Shopping", level=3).wait_for()
    assert rendered.locator("ul > li").all_inner_texts() == ["milk", "bread"]
    assert rendered.locator("pre > code").inner_text() == "make test\n"
    # a column's alignment without a style attribute, which the CSP would refuse (an error)
    quantity = rendered.locator("td").filter(has_text="2")
    assert quantity.evaluate("e => getComputedStyle(e).textAlign") == "right"
    docs = rendered.get_by_role("link", name="the docs")
    assert docs.get_attribute("href") == "https://example.com/docs"
    assert docs.get_attribute("rel") == "nofollow noopener noreferrer"
    # javascript: addresses are no links, only text; the image is a link, never loaded
    assert rendered.get_by_role("link").all_inner_texts() == ["the docs", "image: a logo"]
    assert "[a trap](javascript:window.__pwned=3)" in rendered.inner_text()
    assert "<javascript:window.__pwned=4>" in rendered.inner_text()
    assert rendered.locator("img").count() == 0 and remote == []
    # raw HTML is text: had the <script> been markup, it would have run or (the CSP) been
    # refused, each a console error; a probe logged now arrives after any of them (in order)
    assert '<script>console.error("script ran")</script>' in rendered.inner_text()
    assert page.locator("main script").count() == 0
    with page.expect_console_message(lambda message: message.text == "probe"):
        page.evaluate("console.error('probe')")
    assert watched.errors == ["probe"] and watched.dialogs == []
    assert page.evaluate("window.__pwned") is None

    page.get_by_role("link", name="Raw").click()
    page.locator("table.lines").wait_for()
    assert page.get_by_role("link", name="Raw").get_attribute("aria-current") == "page"
    lines = content_lines(page)
    assert lines[:4] == [("1", "# Shopping"), ("2", ""), ("3", "- milk"), ("4", "- bread")]
    assert [number for number, _ in lines] == [str(n) for n in range(1, 20)]
    # a selection of the whole table copies the lines, not the gutter's numbers
    copied = page.evaluate(
        """() => { const range = document.createRange();
        range.selectNodeContents(document.querySelector("table.lines tbody"));
        getSelection().removeAllRanges(); getSelection().addRange(range);
        return getSelection().toString(); }"""
    )
    assert copied.split("\n")[:5] == ["# Shopping", "", "- milk", "- bread", ""], repr(copied)
    page.get_by_role("link", name="Rendered").click()
    page.locator("div.markdown").wait_for()


def test_a_memory_not_in_markdown_is_raw_with_numbers(console: Any, client: httpx.Client) -> None:
    page = console
    store_id = new_store(client, "Plain text")
    memory = new_memory(client, store_id, "/notes.txt", "# not a heading\n\n<b>x</b>\n")
    page.goto(page.url + f"stores/{store_id}/memories/{memory['id']}")
    assert content_lines(page) == [("1", "# not a heading"), ("2", ""), ("3", "<b>x</b>")]
    assert page.locator("div.markdown").count() == 0
    assert page.get_by_role("link", name="Rendered").count() == 0  # nothing to render
