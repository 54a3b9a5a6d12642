"""The console: web pages in ``memfs server`` for the people who review what agents remember.

Served at ``/console`` (``memfs.server.app.create_app`` mounts ``create_console``; ``memfs
server --no-console`` leaves it out). Server-rendered Jinja2 templates, a stylesheet, no
script a page needs. It reads and writes through the server's ``Storage`` in process, as the
API routes do, never over HTTP. docs/console.md describes the pages and the security model.

Its modules: ``app`` (the ASGI app, error pages, headers), ``context`` (``Console``: what
pages share, and their guards), ``sessions`` (signing in, the session cookie), ``security``
(CSP, CSRF tokens, same-origin POSTs, cookies), ``ratelimit`` (failed sign-ins), ``forms``
(reading a POST), ``rendering`` (Jinja2, messages), ``diff`` (line diffs) and ``pages/``, one
module per group of pages. Everything a page shows of a store is agent-written: templates
autoescape it, always, and the CSP forbids inline script.
"""

from memfs.server.console.app import ConsoleApp, create_console

__all__ = ["ConsoleApp", "create_console"]
