"""Reading a console form: ``application/x-www-form-urlencoded`` bodies, bounded and strict.

``read_form`` returns the fields of a POST as a dict of strings. It refuses (``FormError``, a
400 page) a body past ``MAX_FORM_BYTES`` (a full-size memory, percent-encoded, fits), another
content type, bytes that are not UTF-8, a field sent twice and more than ``MAX_FIELDS``
fields. It needs no multipart parser: the console's forms send text only.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl

from starlette.requests import Request

from memfs.contract.errors import BadRequestError
from memfs.server.http.body import read_body

log = logging.getLogger(__name__)

# 100 KiB of content, each byte percent-encoded (3 bytes), plus the other fields.
MAX_FORM_BYTES = 400 * 1024
MAX_FIELDS = 100
FORM_TYPE = "application/x-www-form-urlencoded"


class FormError(BadRequestError):
    """A form the console cannot read (the message says why, in one line)."""


async def read_form(request: Request) -> dict[str, str]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != FORM_TYPE:
        raise FormError(f"the form must be sent as {FORM_TYPE}")
    body = await read_body(request, MAX_FORM_BYTES, "the form")
    try:
        text = body.decode("ascii")  # percent-encoded: anything else is not a form
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=False,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise FormError("the form is not valid (not UTF-8, or too many fields)") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise FormError(f"the form sends the field {name!r} twice")
        fields[name] = value
    return fields
