"""Signing in to the console in a real Chromium: the form, the session cookie, signing out, a
wrong key, the headers of every page, and the key nowhere after it was typed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kit.browser import Watched, api, needs_chromium
from kit.servers import ServerProcess

pytestmark = needs_chromium

CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"


def sign_in(page: Any, server: ServerProcess, key: str | None = None) -> None:
    page.goto(server.base_url + "/console/")
    page.get_by_label("API key").fill(key or server.api_key)
    page.get_by_role("button", name="Sign in").click()


def test_sign_in_lists_the_stores_and_sign_out_ends_the_session(
    page: Any, console_server: ServerProcess, watched: Watched
) -> None:
    with api(console_server.base_url, console_server.api_key) as client:
        made = client.post("/v1/memory_stores", json={"name": "Team notes", "description": "d1"})
        assert made.status_code == 200, made.text
    page.goto(console_server.base_url + "/console/")
    assert page.url.endswith("/console/sign-in")  # no session yet: sent to sign in
    sign_in(page, console_server)
    page.wait_for_url(re.compile(r"/console/$"))
    page.get_by_role("heading", name="Memory stores", level=1).wait_for()
    assert page.get_by_role("link", name="Team notes", exact=True).is_visible()

    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies["memfs_console"]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Strict"
    assert session["path"] == "/console"
    assert session["secure"] is False  # plain http here (https: Secure, tests/console/test_http)
    assert session["expires"] > 0  # expiring, not a browser-session cookie
    assert "memfs_console_signin" not in cookies  # the pre-session cookie is gone

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/console/sign-in"))
    page.get_by_text("Signed out.").wait_for()
    assert "memfs_console" not in {c["name"] for c in page.context.cookies()}
    page.goto(console_server.base_url + "/console/")
    assert page.url.endswith("/console/sign-in")
    assert watched.dialogs == [] and watched.errors == []


def test_a_wrong_key_is_refused_with_a_message_and_no_cookie(
    page: Any, console_server: ServerProcess
) -> None:
    sign_in(page, console_server, key="sk-not-a-key-of-this-server")
    page.get_by_text("That API key is not one this server accepts.").wait_for()
    assert page.url.endswith("/console/sign-in")
    assert "memfs_console" not in {c["name"] for c in page.context.cookies()}
    assert page.get_by_label("API key").input_value() == ""  # nothing typed is shown again


def test_every_page_sends_the_csp_and_the_key_is_nowhere(
    page: Any, console_server: ServerProcess, access_log: Path
) -> None:
    key = console_server.api_key
    with api(console_server.base_url, key) as client:
        store = client.post("/v1/memory_stores", json={"name": "Headers"}).json()
        memory = client.post(
            f"/v1/memory_stores/{store['id']}/memories", json={"path": "/a/b.md", "content": "x"}
        ).json()
    answers: list[Any] = []
    page.on("response", lambda answer: answers.append(answer))
    html: list[str] = []
    sign_in(page, console_server)
    page.wait_for_url(re.compile(r"/console/$"))
    html.append(page.content())
    for link in ("Headers", "b.md", "Edit"):  # the tree names b.md in its folder a/
        page.get_by_role("link", name=link, exact=True).first.click()
        page.wait_for_load_state()
        html.append(page.content())
    page.goto(f"{console_server.base_url}/console/stores/{store['id']}/memories/mem_nope")
    assert page.get_by_role("heading", level=1).inner_text() == "Not found"
    html.append(page.content())
    page.goto(f"{console_server.base_url}/console/stores/{store['id']}/search?q=x")
    html.append(page.content())

    console_answers = [a for a in answers if "/console" in a.url]
    assert len(console_answers) >= 8
    for answer in console_answers:
        headers = answer.all_headers()
        assert headers.get("content-security-policy") == CSP, answer.url
        assert headers.get("x-content-type-options") == "nosniff", answer.url
        assert headers.get("referrer-policy") == "no-referrer", answer.url
    for answer in console_answers:
        if answer.request.resource_type == "document":
            assert answer.all_headers().get("cache-control") == "no-store", answer.url
    assert any(a.status == 404 for a in console_answers)  # errors carry them too

    # The key: in no page, URL, cookie, nor in the server's log or access log.
    assert all(key not in text for text in html)
    assert all(key not in a.url for a in answers)
    assert all(key not in c["value"] for c in page.context.cookies())
    assert key not in console_server.log_path.read_text()
    logged = access_log.read_text()
    assert "POST /console/sign-in 303" in logged  # the sign-in was logged, as a template
    assert key not in logged and store["id"] not in logged and memory["id"] not in logged


@pytest.mark.parametrize("width", [360])
def test_pages_fit_a_phone(page: Any, console_server: ServerProcess, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 740})
    sign_in(page, console_server)
    page.wait_for_url(re.compile(r"/console/$"))
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width  # reflows: nothing wider than the screen
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.textContent")
    assert focused == "Skip to content"  # the first stop of the keyboard
