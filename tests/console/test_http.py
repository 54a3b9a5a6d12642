"""The console over plain HTTP (the app in process, no browser): admission beside the API,
headers, CSRF and cross-site POSTs, sign-in cookies, the rate limit, sessions in the database,
and the answers to unknown or bad input."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from kit.servers import ServerProcess, free_port
from memfs.server.app import create_app
from memfs.server.backends.sqlite import SqliteStorage
from memfs.server.backends.storage import Storage
from memfs.server.http.metrics import Metrics

KEY = "sk-console-" + "a" * 30
OTHER = "sk-console-" + "b" * 30
BASE = "http://memfs.test"
CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


def browser(app: Any, address: str = "127.0.0.1") -> httpx.AsyncClient:
    """A cookie-keeping client without a key, as a browser is."""
    transport = httpx.ASGITransport(app=app, client=(address, 50000))
    return httpx.AsyncClient(transport=transport, base_url=BASE)


def csrf_of(page: httpx.Response) -> str:
    found = TOKEN.search(page.text)
    assert found is not None, page.text
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, key: str = KEY, **headers: str) -> httpx.Response:
    form = await client.get("/console/sign-in")
    return await client.post(
        "/console/sign-in", data={"csrf": csrf_of(form), "api_key": key}, headers=headers
    )


async def stores_of(storage: Storage) -> list[str]:
    from memfs.server.memory_stores.storage import StoreFilter

    page = await storage.list_stores(StoreFilter(include_archived=True), after=None, limit=100)
    return [s.name for s in page.items]


async def test_the_console_needs_no_key_and_the_api_still_does(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        assert (await client.get("/console")).headers["location"] == "/console/"
        first = await client.get("/console/")
        assert first.status_code == 303 and first.headers["location"] == "/console/sign-in"
        assert (await client.get("/console/sign-in")).status_code == 200
        api = await client.get("/v1/memory_stores")
        assert api.status_code == 401 and api.json()["error"]["type"] == "authentication_error"
        # a path that only starts like the console's is the API's
        assert (await client.get("/consoles")).status_code == 401
        signed = await sign_in(client)
        assert signed.status_code == 303
        # the session cookie opens the console, never the API
        assert (await client.get("/v1/memory_stores")).status_code == 401


async def test_no_console_leaves_console_urls_to_the_api(storage: Storage) -> None:
    app = create_app(storage, [KEY], console=False)
    async with browser(app) as client:
        assert (await client.get("/console/sign-in")).status_code == 401
        found = await client.get("/console/sign-in", headers={"x-api-key": KEY})
        assert found.status_code == 404 and found.json()["type"] == "error"


def test_memfs_server_no_console(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "memfs.db", free_port(), extra_args=["--no-console"]) as server:
        assert httpx.get(server.base_url + "/console/sign-in").status_code == 401
    with ServerProcess(tmp_path / "memfs.db", free_port()) as server:  # on by default
        assert httpx.get(server.base_url + "/console/sign-in").status_code == 200


async def test_the_stores_page_lists_both_apis_stores(storage: Storage) -> None:
    await storage.create_store(name="archived one", description="", metadata={})
    await storage.databricks.create_store("dbx-notes", description="<i>x</i>", creator="k")
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        await sign_in(client)
        page = (await client.get("/console/")).text
    assert '<a href="/console/databricks/dbx-notes">dbx-notes</a>' in page
    assert "&lt;i&gt;x&lt;/i&gt;" in page
    assert "0 of 2,000 memories" in page


async def test_every_console_answer_carries_the_security_headers(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        answers = [
            await client.get("/console/"),
            await client.get("/console/sign-in"),
            await client.get("/console/static/console.css"),
            await client.get("/console/no-such-page"),
            await client.post("/console/sign-in", data={"api_key": KEY}),  # no token: 403
            await client.get("/console/stores/x%00y"),
        ]
        await sign_in(client)
        answers.append(await client.get("/console/stores/memstore_nope"))
    assert [a.status_code for a in answers] == [303, 200, 200, 404, 403, 400, 404]
    for answer in answers:
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert "unsafe-inline" not in answer.headers["content-security-policy"]
    assert answers[1].headers["cache-control"] == "no-store"
    assert answers[2].headers["content-type"].startswith("text/css")
    assert "<script" not in answers[1].text and " style=" not in answers[1].text


async def test_cookies_are_httponly_strict_and_secure_behind_https(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        plain = await sign_in(client)
    async with browser(app) as client:
        https = await sign_in(client, **{"x-forwarded-proto": "https"})
    for answer, secure in ((plain, False), (https, True)):
        session = next(c for c in answer.headers.get_list("set-cookie") if "memfs_console=" in c)
        flags = [part.strip() for part in session.split(";")]
        assert {"Path=/console", "HttpOnly", "SameSite=Strict", "Max-Age=43200"} <= set(flags)
        assert ("Secure" in flags) is secure
        token = flags[0].split("=", 1)[1]
        assert KEY not in session and len(token) >= 40


async def test_a_wrong_key_gets_401_and_no_session(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        wrong = await sign_in(client, key="sk-wrong")
        assert wrong.status_code == 401
        assert "That API key is not one this server accepts." in wrong.text
        assert not any("memfs_console=" in c for c in wrong.headers.get_list("set-cookie"))
        assert (await client.get("/console/")).status_code == 303


async def test_failed_sign_ins_are_limited_per_address(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app, "10.0.0.1") as client:
        for _ in range(5):
            assert (await sign_in(client, key="sk-guess")).status_code == 401
        refused = await sign_in(client)  # the right key too: a refusal tells nothing
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert "Too many failed sign-ins; try again in" in refused.text
        assert not any("memfs_console=" in c for c in refused.headers.get_list("set-cookie"))
    async with browser(app, "10.0.0.2") as client:  # another address is not held back
        assert (await sign_in(client)).status_code == 303


async def test_no_address_can_lock_out_another(storage: Storage) -> None:
    """11 addresses x 5 wrong keys filled the limit shared by all (50 a minute): from then on
    the right key got 429 from anywhere. Each address is limited on its own now."""
    app = create_app(storage, [KEY])
    for n in range(11):
        async with browser(app, f"10.0.1.{n}") as client:
            for _ in range(5):
                assert (await sign_in(client, key="sk-guess")).status_code == 401
            # past its own limit, the right key too: an answer must not tell a right guess
            assert (await sign_in(client)).status_code == 429
    async with browser(app, "10.0.2.1") as client:
        assert (await sign_in(client)).status_code == 303
    async with browser(app, "10.0.2.2") as client:  # its own five failures are its own
        for _ in range(5):
            assert (await sign_in(client, key="sk-guess")).status_code == 401
        assert (await sign_in(client, key="sk-guess")).status_code == 429


async def test_a_post_without_its_token_or_from_another_site_changes_nothing(
    storage: Storage,
) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        await sign_in(client)
        token = csrf_of(await client.get("/console/"))
        refused = [
            await client.post("/console/stores", data={"name": "no token"}),
            await client.post("/console/stores", data={"name": "bad", "csrf": "0" * 64}),
            await client.post(
                "/console/stores",
                data={"name": "cross", "csrf": token},
                headers={"sec-fetch-site": "cross-site"},
            ),
            await client.post(
                "/console/stores",
                data={"name": "origin", "csrf": token},
                headers={"origin": "http://evil.test"},
            ),
        ]
        assert [r.status_code for r in refused] == [403] * 4
        assert "nothing was changed" in refused[0].text
        made = await client.post(
            "/console/stores",
            data={"name": "mine", "csrf": token},
            headers={"sec-fetch-site": "same-origin", "origin": BASE},
        )
        assert made.status_code == 303
    assert await stores_of(storage) == ["mine"]  # the refused ones made nothing
    async with browser(app) as other:  # another browser's token is not this one's
        await sign_in(other)
        stolen = await other.post("/console/stores", data={"name": "x", "csrf": token})
        assert stolen.status_code == 403


async def test_sign_in_needs_its_own_form_token(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        bare = await client.post("/console/sign-in", data={"api_key": KEY, "csrf": "0" * 64})
        assert bare.status_code == 403
        cross = await client.post(
            "/console/sign-in", data={"api_key": KEY}, headers={"sec-fetch-site": "cross-site"}
        )
        assert cross.status_code == 403
        assert "memfs_console" not in client.cookies


async def test_sessions_live_in_the_database_and_end_with_their_key(
    storage: Storage, tmp_path: Path
) -> None:
    both = create_app(storage, [KEY, OTHER])
    async with browser(both) as client:
        await sign_in(client, key=OTHER)
        cookie = client.cookies["memfs_console"]
    # another replica, with its own connections to the same database, knows the session
    second = await SqliteStorage.open(tmp_path / "memfs.db")
    try:
        async with browser(create_app(second, [OTHER])) as client:
            client.cookies.set("memfs_console", cookie, path="/console")
            assert (await client.get("/console/")).status_code == 200
    finally:
        await second.aclose()
    # a server that no longer has the key ends it
    without = create_app(storage, [KEY])
    async with browser(without) as client:
        client.cookies.set("memfs_console", cookie, path="/console")
        assert (await client.get("/console/")).status_code == 303
    async with browser(both) as client:  # and it stays ended (its row is gone)
        client.cookies.set("memfs_console", cookie, path="/console")
        assert (await client.get("/console/")).status_code == 303


async def test_sign_out_deletes_the_session(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        await sign_in(client)
        cookie = client.cookies["memfs_console"]
        token = csrf_of(await client.get("/console/"))
        out = await client.post("/console/sign-out", data={"csrf": token})
        assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
    async with browser(app) as client:  # the old cookie, replayed, opens nothing
        client.cookies.set("memfs_console", cookie, path="/console")
        assert (await client.get("/console/")).status_code == 303


async def test_unknown_and_bad_input_get_a_one_line_message(storage: Storage) -> None:
    app = create_app(storage, [KEY])
    async with browser(app) as client:
        await sign_in(client)
        token = csrf_of(await client.get("/console/"))
        made = await client.post("/console/stores", data={"name": "s", "csrf": token})
        store_url = made.headers["location"].split("?")[0]
        missing = await client.get(store_url + "/memories/mem_nope")
        assert missing.status_code == 404 and "not found" in missing.text
        bad = await client.post(store_url + "/new", data={"path": "no-slash", "csrf": token})
        assert bad.status_code == 400
        assert "path: path must start with &#39;/&#39;" in bad.text
        big = await client.post(
            store_url + "/new", data={"path": "/big", "content": "x" * 102_401, "csrf": token}
        )
        assert big.status_code == 413 and "more than the maximum" in big.text
        search = await client.get(store_url + "/search", params={"q": "x" * 5000})
        assert search.status_code == 400
        twice = await client.post(
            "/console/stores", content=f"csrf={token}&name=a&name=b",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
        assert twice.status_code == 400


async def test_metrics_and_logs_name_console_routes_by_template(storage: Storage) -> None:
    metrics = Metrics()
    app = create_app(storage, [KEY], metrics=metrics)
    async with browser(app) as client:
        await sign_in(client)
        token = csrf_of(await client.get("/console/"))
        made = await client.post("/console/stores", data={"name": "s", "csrf": token})
        await client.get(made.headers["location"])
    rendered = metrics.render()
    assert 'route="/console/stores/{store_id}"' in rendered
    assert 'route="/console/sign-in"' in rendered
    assert "memstore_" not in rendered


async def test_a_memory_holding_nul_is_not_saved_from_a_text_box(storage: Storage) -> None:
    """A browser's text box turns U+0000 into U+FFFD: the edit page of a memory holding NUL
    says so, and a save from it is refused (409), the content untouched (issue 31)."""
    from memfs.contract.models import Actor

    store = await storage.create_store(name="nul", description="", metadata={})
    content = "a\x00b <script>alert(1)</script>"
    memory = await storage.create_memory(
        store.id, path="/n.md", content=content, actor=Actor("api_actor", "k")
    )
    url = f"/console/stores/{store.id}/memories/{memory.id}"
    async with browser(create_app(storage, [KEY])) as client:
        await sign_in(client)
        shown = await client.get(url)
        assert shown.status_code == 200 and "<script>alert" not in shown.text
        form = await client.get(f"{url}/edit")
        assert form.status_code == 200 and "holds NUL characters" in form.text
        saved = await client.post(
            f"{url}/edit",
            data={
                "csrf": csrf_of(form),
                "content": content.replace("\x00", "\ufffd"),  # what a browser sends back
                "precondition": memory.content_sha256,
            },
            headers={"sec-fetch-site": "same-origin", "origin": BASE},
        )
        assert saved.status_code == 409 and "holds NUL characters" in saved.text
    assert (await storage.get_memory(store.id, memory.id)).content == content
