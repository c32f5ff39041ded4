"""The local AUN gateway server: an AUN gateway on one host:port, for development and tests.

[`GatewayServer`][aun_runtime.gateway.GatewayServer] is a local AUN gateway, wire-compatible with the public AUN Python client.
One host:port serves the WebSocket JSON-RPC 2.0 endpoint `/aun` and the small HTTP surface the
client needs (`/pki/*`, `/health`, `/.well-known/aun-gateway`). A development PKI is made in
the data directory on first start; everything acknowledged is kept in SQLite there. The server does
not use the runtime: any AUN client can join it.

This package is the server side only. The gateway agent, which puts a runtime's agents on an AUN
network (this gateway or any other) through the real AUN client, is [`aun_runtime.network`][aun_runtime.network]; its
names are still importable from here for one release, with a `DeprecationWarning`.

Example:
    >>> import asyncio, tempfile
    >>> async def main(tmp):
    ...     async with GatewayServer("127.0.0.1", port=0, data_dir=tmp) as server:
    ...         return server.url.startswith("ws://127.0.0.1:"), server.issuer
    >>> asyncio.run(main(tempfile.mkdtemp()))
    (True, 'aun.localhost')
"""

import warnings
from typing import Any

from ._errors import ErrorCode, GatewayError, GatewayStartError, RPCError
from ._events import GatewayEvent, GatewayEvents
from ._limits import GatewayLimits
from ._server import GatewayServer

__all__ = [
    "ErrorCode",
    "GatewayError",
    "GatewayEvent",
    "GatewayEvents",
    "GatewayLimits",
    "GatewayServer",
    "GatewayStartError",
    "RPCError",
]

#: The gateway agent's names this package exported before they moved to :mod:`aun_runtime.network`.
_MOVED_TO_NETWORK = frozenset({
    "GatewayAgent", "GatewayAgentConfig", "GatewayAgentError", "GatewayAgentStats", "IdentityError", "LinkState",
    "NetworkClientMissingError", "NetworkRefusedError", "NotExposedError", "OutboxFullError", "OutboxWriteError",
})


def __getattr__(name: str) -> Any:
    """The gateway agent's names, from [`aun_runtime.network`][aun_runtime.network], with a `DeprecationWarning`
    (imported here only when asked for: the server never imports the gateway agent)."""
    if name not in _MOVED_TO_NETWORK:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .. import network

    warnings.warn(
        f"aun_runtime.gateway.{name} moved: import it from aun_runtime.network "
        f"(from aun_runtime.network import {name})",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(network, name)
