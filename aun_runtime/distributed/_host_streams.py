"""The host's data streams: who is on each (a worker, its name proved by its secret, or a plain
client), the connection that carries it, and sending to them.

Apart from the servicer because every part of the host asks the same questions of a call (which
stream is this, is it a worker's, is that worker live) and sends on the same connections; this
module answers them once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import grpc
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from ..base._autogen_internals import CallbackChannelConnection
from ._host_records import Refusal, StreamClient, call_metadata
from ._identity import Identities, IdentityRefused
from ._wire import DIRECTORY_TYPE, SECRET_METADATA, WORKER_METADATA, control_event

__all__ = ["END", "DataConnection", "HostStreams", "Sends"]

logger = logging.getLogger("aun_runtime.distributed")

_Status = grpc.StatusCode

#: Put on a stream's send queue to wake its handler, which then ends the stream with the refusal.
END = agent_worker_pb2.Message()


class Sends(Protocol):
    """A data stream's connection, as the host's parts use it: they send on it."""

    async def send(self, message: agent_worker_pb2.Message) -> None: ...


class DataConnection(CallbackChannelConnection[agent_worker_pb2.Message, agent_worker_pb2.Message]):
    """autogen-ext's data connection without its per-message log line (which formats the whole
    message as text even when nobody logs at INFO: most of the host's time per message), and with
    a way to end the stream: a `Refusal` raised by the handler ends it with that status."""

    refusal: Refusal | None = None
    silence: str | None = None  # why the host ends the stream of a worker gone silent

    async def _receive_messages(self, client_id: str, request_iterator: AsyncIterator[agent_worker_pb2.Message]) -> None:
        try:
            async for message in request_iterator:
                await self._handle_message(message)
        except Refusal as refusal:
            self.refusal = refusal
            await self._send_queue.put(END)

    def queued(self) -> agent_worker_pb2.Message | None:
        """The next message waiting to be sent, if one is waiting already (never waits)."""
        return None if self._send_queue.empty() else self._send_queue.get_nowait()

    async def stop_receiving(self) -> None:
        """Stop reading the client's side of the stream (this side is ending it)."""
        self._receiving_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.RpcError):
            await self._receiving_task


class HostStreams:
    """The open data streams by client id, and the connections that carry them (autogen-ext's
    map, shared, so that a connection it adds or removes is seen here)."""

    def __init__(self, identities: Identities, connections: Mapping[str, Sends]) -> None:
        self.identities = identities
        self.connections = connections
        self.clients: dict[str, StreamClient] = {}  # client id -> its data stream

    def open(self, context: Any) -> StreamClient:
        """A new data stream: a worker's (its name proved by its secret) or a plain client's."""
        metadata = call_metadata(context)
        client_id = metadata.get("client-id")
        if not client_id:
            raise Refusal(_Status.INVALID_ARGUMENT, "client-id metadata not found.")
        if client_id in self.clients:
            raise Refusal(_Status.INVALID_ARGUMENT, "this client id already has a data stream")
        name = metadata.get(WORKER_METADATA)
        if name is not None:
            try:
                new = self.identities.check(name, metadata.get(SECRET_METADATA), bind=True)
            except IdentityRefused as exc:
                raise Refusal(_Status.UNAUTHENTICATED, str(exc)) from None
            if new:
                logger.info("host: worker %s is new here; its name is bound to its secret from now on", name)
        client = self.clients[client_id] = StreamClient(client_id, name, context.peer())
        return client

    def caller(self, context: Any) -> tuple[str, StreamClient | None]:
        """The client id of a unary call and, for a worker, its stream (the call must prove the
        same identity as the stream did)."""
        metadata = call_metadata(context)
        client_id = metadata.get("client-id")
        if not client_id:
            raise Refusal(_Status.INVALID_ARGUMENT, "client-id metadata not found.")
        client = self.clients.get(client_id)
        name = metadata.get(WORKER_METADATA)
        if name is None:
            if client is not None and client.worker is not None:
                raise Refusal(_Status.PERMISSION_DENIED, "this client id is a worker's stream; calls on it need its name and secret")
            return client_id, None
        try:
            self.identities.check(name, metadata.get(SECRET_METADATA), bind=False)
        except IdentityRefused as exc:
            raise Refusal(_Status.UNAUTHENTICATED, str(exc)) from None
        if client is None or client.worker != name:
            raise Refusal(_Status.PERMISSION_DENIED, f"worker {name} has no open data stream with this client id")
        return client_id, client

    def worker_caller(self, context: Any) -> StreamClient:
        """The stream of the worker making a call that changes the directory."""
        _, client = self.caller(context)
        if client is None or client.worker is None:
            raise Refusal(_Status.PERMISSION_DENIED, "only a worker, on its open stream, may change the directory")
        return client

    def live(self, worker: str) -> bool:
        """Whether `worker` has a greeted stream open."""
        return any(c.greeted and c.worker == worker for c in self.clients.values())

    def workers_connected(self) -> int:
        return sum(1 for c in self.clients.values() if c.greeted)

    def workers(self) -> list[str]:
        """The names of the workers with a greeted stream open."""
        return sorted({c.worker for c in self.clients.values() if c.greeted and c.worker is not None})

    async def send(self, client_id: str, message: agent_worker_pb2.Message) -> None:
        """Send `message` on the stream of `client_id`, if it is still open."""
        connection = self.connections.get(client_id)
        if connection is not None:
            await connection.send(message)

    async def push(self, change: dict[str, Any]) -> None:
        """Send a change of the directory to every greeted stream."""
        message = control_event(DIRECTORY_TYPE, change)
        for client in list(self.clients.values()):
            connection = self.connections.get(client.client_id) if client.greeted else None
            if connection is not None:
                await connection.send(message)
