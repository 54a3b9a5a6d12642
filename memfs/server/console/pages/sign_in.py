"""Signing in and out of the console: ``/console/sign-in`` and ``/console/sign-out``.

The sign-in form's CSRF token is bound to a pre-session cookie (``PRE_COOKIE``, a random token
set by the form's page), since there is no session yet. A POST is refused (429, one line, with
``Retry-After``) while its own address failed too often (``ratelimit.SignInLimiter``), before
the key is looked at, so that a refusal tells nothing of the key; no other client's failures
ever refuse it, so a right key from any other address signs in. A wrong key is a 401 page that
says so and sets no cookie; the right one starts a session (``sessions.SessionKeeper``), sets
its cookie, removes the pre-session cookie and goes to the stores. The key is never shown again,
logged or put in a URL: the form posts it in the body, and the page after is a redirect.
"""

from __future__ import annotations

import logging
import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memfs.server.console.context import (
    CROSS_SITE_MESSAGE,
    CSRF_FIELD,
    SIGN_IN_PATH,
    Console,
    CrossSiteError,
)
from memfs.server.console.forms import read_form
from memfs.server.console.security import (
    CONSOLE_PATH,
    cookie,
    cross_site,
    csrf_token,
    is_https,
    tokens_match,
)
from memfs.server.console.sessions import COOKIE, plausible_token

log = logging.getLogger(__name__)

PRE_COOKIE = "memfs_console_signin"
PRE_COOKIE_AGE = 3600
PURPOSE = "sign-in"
KEY_FIELD = "api_key"
WRONG_KEY = "That API key is not one this server accepts."


class SignInPages:
    """Signing in and out (module doc)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    async def sign_in_form(self, request: Request) -> Response:
        if await self.console.sessions.current(request) is not None:
            return RedirectResponse(CONSOLE_PATH + "/", status_code=303)
        return _form(request, self.console)

    async def sign_in(self, request: Request) -> Response:
        if cross_site(request):
            raise CrossSiteError(CROSS_SITE_MESSAGE)
        address = request.client.host if request.client else "unknown"
        wait = self.console.limiter.retry_after(address)
        if wait:
            return _form(
                request,
                self.console,
                status=429,
                error=f"Too many failed sign-ins; try again in {wait} seconds.",
                headers={"retry-after": str(wait)},
            )
        form = await read_form(request)
        pre = request.cookies.get(PRE_COOKIE)
        if not plausible_token(pre) or not tokens_match(
            form.get(CSRF_FIELD, ""), csrf_token(pre or "", PURPOSE)
        ):
            raise CrossSiteError(CROSS_SITE_MESSAGE)
        signed_in = await self.console.sessions.sign_in(form.get(KEY_FIELD, "").strip())
        if signed_in is None:
            self.console.limiter.failed(address)
            return _form(request, self.console, status=401, error=WRONG_KEY)
        response = RedirectResponse(CONSOLE_PATH + "/", status_code=303)
        secure = is_https(request)
        response.headers.append(
            "set-cookie",
            cookie(COOKIE, signed_in.token, max_age=self.console.sessions.max_age(), secure=secure),
        )
        response.headers.append("set-cookie", cookie(PRE_COOKIE, "", max_age=0, secure=secure))
        return response

    async def sign_out(self, request: Request) -> Response:
        signed_in = await self.console.signed_in(request)
        await self.console.post_form(request, signed_in)
        await self.console.sessions.sign_out(signed_in)
        response = RedirectResponse(SIGN_IN_PATH + "?notice=signed-out", status_code=303)
        response.headers.append(
            "set-cookie", cookie(COOKIE, "", max_age=0, secure=is_https(request))
        )
        return response

    def routes(self) -> list[Route]:
        return [
            Route("/sign-in", self.sign_in_form, methods=["GET"]),
            Route("/sign-in", self.sign_in, methods=["POST"]),
            Route("/sign-out", self.sign_out, methods=["POST"]),
        ]


def _form(
    request: Request,
    console: Console,
    *,
    status: int = 200,
    error: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """The sign-in page, with the pre-session cookie its form token is bound to (kept if the
    browser has one, so a second tab's form stays valid)."""
    pre = request.cookies.get(PRE_COOKIE)
    fresh = not plausible_token(pre)
    if fresh:
        pre = secrets.token_urlsafe(32)
    assert pre is not None
    response = console.renderer.page(
        request,
        "sign_in.html",
        signed_in=None,
        status=status,
        error=error,
        headers=headers,
        title="Sign in",
        sign_in_csrf=csrf_token(pre, PURPOSE),
    )
    if fresh:
        response.headers.append(
            "set-cookie",
            cookie(PRE_COOKIE, pre, max_age=PRE_COOKIE_AGE, secure=is_https(request)),
        )
    return response
