"""Whether a memfs server offers an extension, from ``GET /v1/memfs/capabilities``.

The hosted APIs have no such route (404): anything but a clear yes (a 404, an error, a timeout)
is a no, and the caller does without the extension (polling instead of a change stream, the
mount's own index instead of server search). One try, no retries: it is asked at start-up.
"""

from __future__ import annotations

import logging
from typing import Protocol

from memfs.contract.errors import ApiConnectionError, ApiError
from memfs.contract.models import JsonObject

log = logging.getLogger(__name__)


class CapabilitiesSource(Protocol):
    """A client that can ask its server for ``/v1/memfs/capabilities`` (both APIs' clients)."""

    async def capabilities(self) -> JsonObject: ...


async def server_extensions(client: CapabilitiesSource) -> frozenset[str]:
    """The extensions the capabilities of ``client``'s server say ``true`` to (none if asking
    failed): one request, for a caller that needs several of them."""
    try:
        body = await client.capabilities()
    except (ApiError, ApiConnectionError) as exc:
        log.debug("no extensions: capabilities check failed (%s)", type(exc).__name__)
        return frozenset()
    return frozenset(name for name, value in body.items() if value is True)


async def server_offers(client: CapabilitiesSource, extension: str) -> bool:
    """True if the capabilities of ``client``'s server say ``extension: true``."""
    return extension in await server_extensions(client)
