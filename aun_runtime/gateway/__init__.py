"""A local AUN gateway, wire-compatible with the public AUN Python client (``fastaun``).

One host:port serves the WebSocket JSON-RPC 2.0 endpoint ``/aun`` and the small HTTP surface the
client needs (``/pki/*``, ``/health``, ``/.well-known/aun-gateway``). A development PKI is made in
the data directory on first start; everything acknowledged is kept in SQLite there.

Example:
    >>> async def main(tmp):                                      # doctest: +SKIP
    ...     async with GatewayServer("127.0.0.1", port=0, data_dir=tmp) as server:
    ...         print(server.url, server.issuer, server.root_ca_path)
"""

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
