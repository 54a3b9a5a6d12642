"""The console: web pages in ``memfs server`` for the people who review what agents remember.

Served at ``/console`` (``memfs.server.app.create_app`` mounts ``create_console``; ``memfs
server --no-console`` leaves it out). Server-rendered Jinja2 templates, a stylesheet, no
script a page needs. It reads and writes through the server's ``Storage`` in process, as the
API routes do, never over HTTP. docs/console.md describes the pages and the security model.

What it keeps of its own (sign-in sessions) and the counts and listings the APIs do not offer
are its ``storage`` (``ConsoleStorage``), in SQL in the same database (``sql``). Everything a
page shows of a store is agent-written: templates autoescape it, always, and the CSP forbids
inline script.
"""

from memfs.server.console.app import ConsoleApp, create_console

__all__ = ["ConsoleApp", "create_console"]
