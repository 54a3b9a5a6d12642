"""Log lines of a mount of several stores name the store they are about.

``CURRENT`` holds the slug of the store whose work the running trio task does: the router sets
it for each kernel request (the slot's name), the daemon for each store's background tasks
(its write-back queue, fetches and change feed inherit it: a trio task starts with a copy of
its spawner's context). ``name_stores_in_log`` makes every log record made meanwhile start with
``[slug]``, so "upload of /a.md failed" says in which store. A mount of one store never sets
it: its log reads as it always did.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

CURRENT: ContextVar[str | None] = ContextVar("memfs_store", default=None)


def name_stores_in_log() -> None:
    """From now on, a log record made while ``CURRENT`` names a store starts with ``[slug]``."""
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        slug = CURRENT.get()
        if slug is not None and isinstance(record.msg, str):
            # the message is a %-format when it has arguments: the slug must not be one
            shown = slug.replace("%", "%%") if record.args else slug
            record.msg = f"[{shown}] {record.msg}"
        return record

    logging.setLogRecordFactory(factory)
