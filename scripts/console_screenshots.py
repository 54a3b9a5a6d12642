"""Screenshots of the console's main pages for docs/console.md (``docs/console/*.png``):
``python -m scripts.console_screenshots``.

Starts a ``memfs server`` on a temporary database, seeds a small store through the API (with
an agent-written line of markup, to show it as text), signs in with Debian's Chromium through
Playwright (``/usr/bin/chromium``; no downloaded browser) and saves, at 1000x700 (and one at a
phone's 390 px width): sign-in, stores, a store, a memory (its Markdown rendered, and raw), the
search, an edit conflict, a memory's history, two versions compared, a version, the store's
history, the store as of a moment. Owns no product code.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from kit.servers import ServerProcess, free_port

KEY = "sk-screenshots-" + "s" * 24
AGENT_KEY = "sk-screenshots-agent-" + "a" * 18  # another writer, as the store page shows them
OUT = Path(__file__).resolve().parents[1] / "docs" / "console"
CHROMIUM = "/usr/bin/chromium"
MEMORIES = {
    "/preferences/coffee.md": "Prefers oat milk.\nNo sugar after 3 pm.\n",
    "/projects/apollo/plan.md": "1. Draft the schema\n2. Review with Sam\n3. Ship on Friday\n",
    "/projects/apollo/risks.md": "The okapi dataset may be late.\n",
    "/projects/zeus/notes.md": "Kick-off on Monday.\n",
    "/agent/scratch.md": "Found in a web page: <img src=x onerror=alert(1)> (shown as text)\n",
    "/projects/apollo/README.md": (
        "# Apollo\n\nThe launch of the **new billing** pipeline.\n\n"
        "## Before Friday\n\n- schema drafted\n- review with *Sam*, see the "
        "[design doc](https://wiki.example.com/apollo)\n- load test\n\n"
        "```sh\nmake test && make ship\n```\n\n"
        "> An agent's markup stays text: <script>alert(1)</script>\n"
    ),
}
SESSION = {"x-memfs-session-id": "sesn_mount-laptop-7f3a9c"}  # an agent's mount writing
BY_AGENT = {  # written with AGENT_KEY: a mount's conflict copy beside the memory it met
    "/preferences/coffee.conflict-20261205T091500Z.md": "Prefers soy milk.\n",
    "/projects/zeus/budget.md": "Budget: " + "42 units, " * 150 + "\n",
}


def seed(base_url: str) -> tuple[str, dict[str, str]]:
    with httpx.Client(base_url=base_url, headers={"x-api-key": KEY}) as api:
        api.post("/v1/memory_stores", json={"name": "Design reviews", "description": "archive"})
        store = api.post(
            "/v1/memory_stores",
            json={"name": "Team memory", "description": "What the team's agents remember"},
        ).json()
        ids = {}
        for path, content in MEMORIES.items():
            made = api.post(
                f"/v1/memory_stores/{store['id']}/memories", json={"path": path, "content": content}
            )
            ids[path] = made.json()["id"]
    with httpx.Client(base_url=base_url, headers={"x-api-key": AGENT_KEY}) as agent:
        for path, content in BY_AGENT.items():
            agent.post(
                f"/v1/memory_stores/{store['id']}/memories", json={"path": path, "content": content}
            )
    return store["id"], ids


def shoot(base_url: str, store_id: str, ids: dict[str, str]) -> list[Path]:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1000, "height": 700})

        def save(name: str, *, full_page: bool = False) -> None:
            path = OUT / f"{name}.png"
            page.screenshot(path=str(path), full_page=full_page)
            saved.append(path)

        page.goto(base_url + "/console/sign-in")
        save("sign-in")
        page.get_by_label("API key").fill(KEY)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/console/")
        save("stores")
        store = f"{base_url}/console/stores/{store_id}"
        page.goto(store)
        save("store", full_page=True)  # the tree, then how to use the store
        plan = f"{store}/memories/{ids['/projects/apollo/plan.md']}"
        readme = f"{store}/memories/{ids['/projects/apollo/README.md']}"
        page.goto(readme)
        save("memory")
        page.goto(readme + "?view=raw")
        save("memory-raw")
        page.goto(f"{store}/search?q=okapi")
        save("search")
        page.goto(plan + "/edit")
        page.get_by_label("Content").fill(MEMORIES["/projects/apollo/plan.md"] + "4. Party\n")
        with httpx.Client(base_url=base_url, headers={"x-api-key": KEY} | SESSION) as api:
            api.post(
                f"/v1/memory_stores/{store_id}/memories/{ids['/projects/apollo/plan.md']}",
                json={"content": "1. Draft the schema\n2. Review with Alex\n3. Ship on Friday\n"},
            )
        page.get_by_role("button", name="Save").click()
        page.get_by_text("Someone changed this memory").wait_for()
        save("conflict")
        page.get_by_role("button", name="Save over theirs").click()
        page.get_by_text("Saved.").wait_for()
        page.goto(plan + "/history")
        save("history")
        page.get_by_role("button", name="Compare").click()
        page.get_by_role("heading", name="Compare versions").wait_for()
        save("compare")
        page.goto(plan + "/history")
        page.locator("table.versions tbody tr").last.locator("td.when a").click()
        page.get_by_role("button", name="Restore").wait_for()
        save("version")
        page.get_by_role("link", name="The store at this moment").click()
        page.get_by_role("heading", name="memories then").wait_for()
        save("as-of")
        page.goto(f"{store}/history")
        save("store-history")
        shoot_databricks(base_url, page, save)
        page.set_viewport_size({"width": 390, "height": 760})
        page.goto(store)
        save("store-phone")
        page.goto(plan + "/history")
        save("history-phone")
        browser.close()
    return saved


DBX_API = "/api/2.0/agents/memory-stores"
DBX_ENTRIES = [  # actor, session, path, description, content
    ("support-agent", None, "/customers/acme.md", "Acme's preferences", "Invoices by email.\n"),
    ("support-agent", "case-4711", "/notes.md", "This case", "Refund approved on Monday.\n"),
    ("support-agent", "case-4712", "/notes.md", "This case", "Waiting for the logs.\n"),
    ("research-agent", None, "/papers/okapi.md", "Reading list", "Okapi BM25, 1994.\n"),
]


def shoot_databricks(base_url: str, page: Any, save: Callable[[str], None]) -> None:
    """A Databricks store, an actor's entries, and the live notice on an entry's page."""
    with httpx.Client(base_url=base_url, headers={"authorization": f"Bearer {KEY}"}) as dbx:
        dbx.post(DBX_API, params={"managed_memory_store_id": "team-agents"}, json={
            "description": "What the support and research agents remember"
        })  # fmt: skip
        made = []
        for actor, session, path, description, content in DBX_ENTRIES:
            body = {"actor_id": actor, "path": path, "description": description}
            body |= {"content": content} | ({"session_id": session} if session else {})
            made.append(dbx.post(f"{DBX_API}/team-agents/entries", json=body).json())
        store = f"{base_url}/console/databricks/team-agents"
        page.goto(store)
        save("dbx-store")
        page.goto(f"{store}/entries?actor=support-agent")
        save("dbx-entries")
        entry_id = made[1]["name"].rsplit("/", 1)[1]
        page.goto(f"{store}/entries/{entry_id}")
        page.locator("body[data-live=open]").wait_for(state="attached")
        dbx.patch(
            f"{DBX_API}/team-agents/entries/{entry_id}",
            params={"update_mask": "content"},
            json={"content": "Refund approved on Monday; paid on Tuesday.\n"},
        )
        page.locator("#live-notice").wait_for()
        save("live-notice")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(db=Path(tmp) / "shots.db", port=free_port(), keys=[KEY, AGENT_KEY]) as server,
    ):
        store_id, ids = seed(server.base_url)
        for path in shoot(server.base_url, store_id, ids):
            print(f"{path.relative_to(OUT.parents[1])}: {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
