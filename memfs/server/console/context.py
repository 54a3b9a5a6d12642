"""What every console page works with: ``Console`` (the storage, sessions, limiter, templates)
and the guards a page calls first.

- ``await console.signed_in(request)``: the request's session, or ``SignInRequiredError``
  (answered with a redirect to the sign-in page: nothing else runs);
- ``await console.post_form(request, signed_in)``: the fields of a POST whose origin and CSRF
  token are right, or ``CrossSiteError`` (a 403 page; nothing else runs). Every POST handler
  reads its form through it, so a cross-site or stale form changes nothing.

A page group (``PageGroup``) is a class of ``pages/`` made on the ``Console``, one method per
page, whose ``routes()`` maps its URLs onto them; ``app`` collects them. A page talks to
``Storage`` in process, as the API routes do (no HTTP), writes as ``signed_in.actor`` and lets
``memfs.contract.errors.ApiError`` escape for the one-line error page (``app``), or catches it
to show the form again with the message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from starlette.requests import Request
from starlette.routing import Route

from memfs.contract.errors import ApiError
from memfs.server.backends.storage import Storage
from memfs.server.console.forms import read_form
from memfs.server.console.ratelimit import SignInLimiter
from memfs.server.console.rendering import Renderer
from memfs.server.console.security import CONSOLE_PATH, cross_site, tokens_match
from memfs.server.console.sessions import SessionKeeper, SignedIn
from memfs.server.console.storage import ConsoleStorage
from memfs.server.db.notify import ChangeHub
from memfs.server.http.metrics import Metrics

log = logging.getLogger(__name__)

SIGN_IN_PATH = CONSOLE_PATH + "/sign-in"
CSRF_FIELD = "csrf"


class SignInRequiredError(Exception):
    """The request has no live session: it is sent to the sign-in page."""


class CrossSiteError(ApiError):
    """A POST from another site, or with a missing or stale form token: refused, unchanged."""

    status = 403
    error_type = "permission_error"


CROSS_SITE_MESSAGE = (
    "This form came from another site or has expired, so nothing was changed. "
    "Reload the page and try again."
)


class PageGroup(Protocol):
    """A group of pages (a class of ``pages``, made on the ``Console``): its URLs."""

    def routes(self) -> list[Route]: ...


@dataclass(frozen=True)
class Console:
    """The console's parts, shared by every page (module docstring)."""

    storage: Storage
    console_storage: ConsoleStorage  # the sessions and counts, in ``storage``'s database
    sessions: SessionKeeper
    limiter: SignInLimiter
    renderer: Renderer
    hub: ChangeHub | None = None  # the live pages' changes (``live``); None: not offered
    metrics: Metrics = field(default_factory=Metrics)

    async def signed_in(self, request: Request) -> SignedIn:
        if request.method == "POST" and cross_site(request):
            # refused as such, before the session: a cross-site POST carries no cookie
            # (SameSite=Strict) and would otherwise look like a signed-out one
            raise CrossSiteError(CROSS_SITE_MESSAGE)
        signed_in = await self.sessions.current(request)
        if signed_in is None:
            raise SignInRequiredError()
        return signed_in

    async def post_form(
        self, request: Request, signed_in: SignedIn, purpose: str = "console"
    ) -> dict[str, str]:
        """The POST's fields, once its origin and form token are checked (module docstring)."""
        if cross_site(request):
            raise CrossSiteError(CROSS_SITE_MESSAGE)
        form = await read_form(request)
        if not tokens_match(form.get(CSRF_FIELD, ""), signed_in.csrf(purpose)):
            raise CrossSiteError(CROSS_SITE_MESSAGE)
        return form
