"""``ToolError``: a tool call that did not do what it was asked, and the one line that says why.

The MCP server answers it as a tool result with ``isError`` set, its message as the text, so
the model reads it (the memory tool's SDK implementations raise the same kind of error).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


class ToolError(Exception):
    """The call failed or was refused; ``str()`` is the message for the model."""


def read_only_refusal(what: str) -> ToolError:
    return ToolError(f"The memory store is read-only: {what} was refused and nothing changed.")


def text_argument(arguments: Mapping[str, Any], name: str, *, command: str = "") -> str:
    """The string argument ``name``; a missing or non-string one is a ToolError."""
    value = arguments.get(name)
    if not isinstance(value, str):
        where = f" for command `{command}`" if command else ""
        state = "Missing" if value is None else "Invalid (not a string)"
        raise ToolError(f"{state} parameter `{name}`{where}")
    return value


def int_argument(
    arguments: Mapping[str, Any], name: str, *, default: int, low: int, high: int
) -> int:
    """The whole-number argument ``name`` from ``low`` to ``high`` (``default`` if absent)."""
    value = arguments.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolError(
            f"Invalid `{name}` parameter: {value!r}. It should be a whole number "
            f"from {low} to {high}."
        )
    return value
