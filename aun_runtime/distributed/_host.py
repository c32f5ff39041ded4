"""`AUNHost`: autogen-ext's `GrpcWorkerAgentRuntimeHost` with the AUN servicer, TLS and a directory.

It serves autogen-ext's `AgentRpc` service (so it routes like autogen-ext's host, and plain
autogen-ext workers can connect too) plus a small JSON service, `aun.Directory`, for group changes,
leaving and counters. It binds to loopback unless told otherwise. Workers prove their names with
their secrets (see `._identity`); what the host knows of who owns what lives as long as it
does, or, given a state file, across its restarts (see `._host_state`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ._host_state import HostState, HostStateFile
from ._servicer import AUNHostServicer, HostStats, rpc_handlers
from ._tls import HostTLS

__all__ = ["DEFAULT_HOST_ADDRESS", "AUNHost"]

DEFAULT_HOST_ADDRESS = "127.0.0.1:50051"

#: Seconds between the host's own pings of each worker's connection, and how long it waits for the
#: answer before it drops the connection (the worker's AIDs become *away* and their senders send
#: to the other instances): a worker that is frozen or cut off is dropped within their sum.
PING_INTERVAL = 1.0
PING_TIMEOUT = 2.0
#: The host accepts keepalive pings from workers as often as they send them (every 20 s), and pings
#: each worker itself every `PING_INTERVAL`, whether or not messages flow.
_SERVER_OPTIONS = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_time_ms", int(PING_INTERVAL * 1000)),
    ("grpc.keepalive_timeout_ms", int(PING_TIMEOUT * 1000)),
    ("grpc.http2.ping_timeout_ms", int(PING_TIMEOUT * 1000)),  # what gRPC 1.70 waits on (60 s by default)
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 8 * 1024 * 1024),
    ("grpc.max_send_message_length", 8 * 1024 * 1024),
]


class AUNHost(GrpcWorkerAgentRuntimeHost):
    """The host of a cluster of [`WorkerRuntime`][aun_runtime.distributed.WorkerRuntime] workers.

    Args:
        address: `host:port` to bind (port 0 picks a free port; see `port`).
        tls: TLS settings; without them the port is plain (keep it on loopback or a private network).
        state: the host's state file: worker names and their secrets' digests, AID ownership,
            service AIDs and groups are kept there, so that after a restart nobody can claim what
            was someone else's. None (the default) keeps them in memory only: after a restart the
            first connection to claim a name or an AID gets it. A `HostState` object keeps it
            elsewhere (`aun-runtime host --state postgresql://...` gives the elected host's).

    Raises:
        HostStateError: another running host holds `state`, or it is not a host state file.

    Example:
        ```python
        host = AUNHost("127.0.0.1:0", state="host.state")
        await host.open()
        print(host.address)
        ...
        await host.stop()
        ```
    """

    def __init__(
        self, address: str = DEFAULT_HOST_ADDRESS, *, tls: HostTLS | None = None,
        state: str | Path | HostState | None = None,
    ) -> None:
        # autogen-ext's constructor binds a plain port; this one binds the port itself (TLS or not)
        # and serves the AUN servicer and directory service, then reuses autogen-ext's start/stop.
        state_file = HostStateFile(state) if isinstance(state, str | Path) else state
        self.state_path = state_file.path if state_file is not None else None
        try:
            servicer = AUNHostServicer(state_file)
        except BaseException:
            if state_file is not None:
                state_file.close()
            raise
        self._server = grpc.aio.server(options=_SERVER_OPTIONS)
        self._servicer = servicer
        self._aun_servicer = servicer
        self._server.add_generic_rpc_handlers(rpc_handlers(servicer))
        # gRPC's standard health service (grpc.health.v1.Health), for a load balancer or an
        # orchestrator's gRPC probe: SERVING (the server, service "") while the host serves.
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        try:
            if tls is None:
                self.port = self._server.add_insecure_port(address)
            else:
                self.port = self._server.add_secure_port(address, tls.server_credentials())
        except BaseException:
            servicer.close_state()
            raise
        if self.port == 0:
            servicer.close_state()
            raise OSError(f"cannot bind {address}")
        self._address = f"{address.rsplit(':', 1)[0]}:{self.port}"
        self._serve_task = None
        self.tls = tls is not None

    async def open(self) -> None:
        """Start serving, and return once the port accepts connections."""
        if self._serve_task is not None:
            raise RuntimeError("the host is already serving")
        await self._server.start()
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._serve_task = asyncio.get_running_loop().create_task(self._server.wait_for_termination())

    async def stop(self, grace: int = 5) -> None:
        """Stop serving; the state file (if any) holds everything, and its lock is let go.

        The workers' streams are ended first, each call cleanly (its worker reconnects to the
        next host), within `grace` seconds; the server then stops."""
        try:
            await self.health.enter_graceful_shutdown()  # NOT_SERVING while it lets go
            await self._aun_servicer.end_streams(timeout=grace)
            await super().stop(grace=grace)
        finally:
            self._aun_servicer.close_state()

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
