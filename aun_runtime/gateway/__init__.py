"""The AUN network side of the runtime: a local AUN gateway, and the gateway agent that bridges.

:class:`GatewayAgent` gives a runtime's agents AUN identities through the real AUN client
(``fastaun``, the ``gateway`` extra, imported only when a gateway agent starts) and carries their
messages to and from any AUN gateway, durably (see :mod:`aun_runtime.gateway._gateway_agent`).

:class:`GatewayServer` is a local AUN gateway, wire-compatible with the public AUN Python client.
One host:port serves the WebSocket JSON-RPC 2.0 endpoint ``/aun`` and the small HTTP surface the
client needs (``/pki/*``, ``/health``, ``/.well-known/aun-gateway``). A development PKI is made in
the data directory on first start; everything acknowledged is kept in SQLite there.

Example:
    >>> import asyncio, tempfile
    >>> async def main(tmp):
    ...     async with GatewayServer("127.0.0.1", port=0, data_dir=tmp) as server:
    ...         return server.url.startswith("ws://127.0.0.1:"), server.issuer
    >>> asyncio.run(main(tempfile.mkdtemp()))
    (True, 'aun.localhost')
"""

from ._agent_config import GatewayAgentConfig
from ._errors import ErrorCode, GatewayError, GatewayStartError, RPCError
from ._events import GatewayEvent, GatewayEvents
from ._gateway_agent import GatewayAgent, GatewayAgentError, GatewayAgentStats, NotExposedError
from ._identity import IdentityError, NetworkClientMissingError
from ._limits import GatewayLimits
from ._link import LinkState
from ._outbox import OutboxFullError, OutboxWriteError
from ._server import GatewayServer
from ._verdict import NetworkRefusedError

__all__ = [
    "ErrorCode",
    "GatewayAgent",
    "GatewayAgentConfig",
    "GatewayAgentError",
    "GatewayAgentStats",
    "GatewayError",
    "GatewayEvent",
    "GatewayEvents",
    "GatewayLimits",
    "GatewayServer",
    "GatewayStartError",
    "IdentityError",
    "LinkState",
    "NetworkClientMissingError",
    "NetworkRefusedError",
    "NotExposedError",
    "OutboxFullError",
    "OutboxWriteError",
    "RPCError",
]
