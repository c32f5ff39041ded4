"""`AUNHost`: autogen-ext's `GrpcWorkerAgentRuntimeHost` with the AUN servicer, TLS and a directory.

It serves autogen-ext's `AgentRpc` service (so it routes like autogen-ext's host, and plain
autogen-ext workers can connect too) plus a small JSON service, `aun.Directory`, for group changes,
leaving and counters. It binds to loopback unless told otherwise. Workers prove their names with
their secrets (see `._identity`); what the host remembers of them lives as long as it does.
"""

from __future__ import annotations

import asyncio

import grpc
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost

from ._servicer import AUNHostServicer, HostStats, rpc_handlers
from ._tls import HostTLS

__all__ = ["DEFAULT_HOST_ADDRESS", "AUNHost"]

DEFAULT_HOST_ADDRESS = "127.0.0.1:50051"

#: The host accepts keepalive pings from workers as often as they send them (every 20 s).
_SERVER_OPTIONS = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.max_receive_message_length", 8 * 1024 * 1024),
    ("grpc.max_send_message_length", 8 * 1024 * 1024),
]


class AUNHost(GrpcWorkerAgentRuntimeHost):
    """The host of a cluster of [`WorkerRuntime`][aun_runtime.distributed.WorkerRuntime] workers.

    Args:
        address: `host:port` to bind (port 0 picks a free port; see `port`).
        tls: TLS settings; without them the port is plain (keep it on loopback or a private network).

    Example:
        ```python
        host = AUNHost("127.0.0.1:0")
        await host.open()
        print(host.address)
        ...
        await host.stop()
        ```
    """

    def __init__(self, address: str = DEFAULT_HOST_ADDRESS, *, tls: HostTLS | None = None) -> None:
        # autogen-ext's constructor binds a plain port; this one binds the port itself (TLS or not)
        # and serves the AUN servicer and directory service, then reuses autogen-ext's start/stop.
        self._server = grpc.aio.server(options=_SERVER_OPTIONS)
        self._servicer = servicer = AUNHostServicer()
        self._aun_servicer = servicer
        self._server.add_generic_rpc_handlers(rpc_handlers(servicer))
        if tls is None:
            self.port = self._server.add_insecure_port(address)
        else:
            self.port = self._server.add_secure_port(address, tls.server_credentials())
        if self.port == 0:
            raise OSError(f"cannot bind {address}")
        self._address = f"{address.rsplit(':', 1)[0]}:{self.port}"
        self._serve_task = None
        self.tls = tls is not None

    async def open(self) -> None:
        """Start serving, and return once the port accepts connections."""
        if self._serve_task is not None:
            raise RuntimeError("the host is already serving")
        await self._server.start()
        self._serve_task = asyncio.get_running_loop().create_task(self._server.wait_for_termination())

    @property
    def address(self) -> str:
        """The bound `host:port`."""
        return self._address

    @property
    def stats(self) -> HostStats:
        return self._aun_servicer.stats

    @property
    def servicer(self) -> AUNHostServicer:
        return self._aun_servicer
