"""A runtime's agents on the AUN network: the gateway agent, the client side of AUN.

[`GatewayAgent`][aun_runtime.network.GatewayAgent] gives a runtime's agents AUN identities through the real AUN client
(`fastaun`, the `gateway` extra, imported only when a gateway agent starts) and carries their
messages to and from any AUN gateway, durably: what leaves waits in an outbox on disk until the
network has it, and what arrives is acknowledged only once it is in the archive.
[`GatewayAgentConfig`][aun_runtime.network.GatewayAgentConfig] says which gateway, which data directory and which AIDs.

This package is the client side only. The local AUN gateway server, which the gateway agent can
join like any other gateway and which does not use the runtime at all, is
[`aun_runtime.gateway`][aun_runtime.gateway].

Example:
    ```python
    from aun_runtime.network import GatewayAgent, GatewayAgentConfig

    async with AUNRuntime(domain="aun.localhost") as runtime:
        await runtime.register_agent("coder.aun.localhost", Coder)
        config = GatewayAgentConfig(data_dir="agent-data", gateway_url="ws://127.0.0.1:20001/aun",
                                    root_ca_path="aun-gateway-data/pki/root.pem")
        async with GatewayAgent(runtime, config) as gateway:
            await gateway.wait_connected()
            ...  # coder.aun.localhost now reaches, and is reached by, any AUN client
    ```
"""

from ..base._errors import OutboxFullError
from ._config import GatewayAgentConfig
from ._errors import (
    GatewayAgentError,
    IdentityError,
    NetworkClientMissingError,
    NetworkRefusedError,
    NotExposedError,
)
from ._gateway_agent import GatewayAgent, GatewayAgentStats
from ._identity import quiet_client
from ._link import LinkState
from ._outbox import OutboxWriteError

__all__ = [
    "GatewayAgent",
    "GatewayAgentConfig",
    "GatewayAgentError",
    "GatewayAgentStats",
    "IdentityError",
    "LinkState",
    "NetworkClientMissingError",
    "NetworkRefusedError",
    "NotExposedError",
    "OutboxFullError",
    "OutboxWriteError",
    "quiet_client",
]
