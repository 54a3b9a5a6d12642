"""The console's defences that every page shares: headers, CSRF tokens, same-origin POSTs,
cookies.

- ``SECURITY_HEADERS`` go on every console answer, errors included (``app.ConsoleApp``): a
  Content-Security-Policy without ``'unsafe-inline'`` (no inline script or style can run, even
  if an escaping bug let markup through), no framing, no referrer, no MIME sniffing; pages are
  ``no-store`` (they show memories).
- A CSRF token is an HMAC of a secret only the browser's cookie holds (the session token, or
  before sign-in the pre-session token) and the form's purpose: it is bound to that browser,
  needs no state on the server, and is the same on every replica. ``csrf_token`` makes one,
  ``tokens_match`` compares in constant time.
- ``cross_site`` refuses a POST that a browser says came from another site (``Sec-Fetch-Site``)
  or whose ``Origin`` is not this server, before its CSRF token is even looked at.
- ``cookie`` writes a ``Set-Cookie`` value: ``Path=/console``, ``HttpOnly``,
  ``SameSite=Strict``, and ``Secure`` when the request came over https (``is_https``).

This module must not touch storage.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from urllib.parse import urlsplit

from starlette.requests import Request

log = logging.getLogger(__name__)

CONSOLE_PATH = "/console"
CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}
PAGE_CACHE = "no-store"


def csrf_token(secret: str, purpose: str) -> str:
    """The form token of ``purpose`` for the browser holding ``secret`` (its cookie's token)."""
    return hmac.new(secret.encode("utf-8"), purpose.encode("utf-8"), hashlib.sha256).hexdigest()


def tokens_match(presented: str, expected: str) -> bool:
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


def is_https(request: Request) -> bool:
    """Whether the browser reached us over https: directly, or through a proxy that says so
    (``X-Forwarded-Proto: https`` or ``Forwarded: proto=https``). A client that claims https
    over plain http only makes its own cookies ``Secure``, which its browser then never sends
    back over http: the claim can make a cookie stricter, never weaker, so it is believed."""
    if request.url.scheme == "https":
        return True
    forwarded_proto = request.headers.get("x-forwarded-proto", "")
    if forwarded_proto.split(",")[0].strip().lower() == "https":
        return True
    forwarded = request.headers.get("forwarded", "").lower()
    return "proto=https" in forwarded.replace(" ", "")


def cookie(name: str, value: str, *, max_age: int, secure: bool) -> str:
    """A ``Set-Cookie`` value for a console cookie (``max_age`` 0 deletes it)."""
    parts = [
        f"{name}={value}",
        f"Path={CONSOLE_PATH}",
        f"Max-Age={max_age}",
        "HttpOnly",
        "SameSite=Strict",
    ]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def cross_site(request: Request) -> bool:
    """Whether a POST comes from another site, as the browser tells. ``Sec-Fetch-Site`` decides
    when it is sent (every current browser does): only ``same-origin`` (or ``none``: typed or
    bookmarked) passes. Without it, an ``Origin`` naming another host is refused. ``Origin:
    null`` is no evidence either way: a browser sends it for our own forms too, since pages
    say ``Referrer-Policy: no-referrer``. A client that sends neither (curl, a test) is judged
    by its CSRF token alone, as every POST also is."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return False
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc.lower() != host.lower()
