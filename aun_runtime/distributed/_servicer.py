"""The host's servicer: autogen-ext's, with AUN rules, a directory, lifecycle lines and counters.

On top of autogen-ext's routing it:

* **refuses RPC**: an ``RpcRequest`` is answered at once with an error (a remote worker may still
  try; AUN has no request/response), instead of being forwarded (or hanging forever);
* **keeps the directory**: which worker holds which AID (held, or *away* when its worker vanished
  without leaving) and every group, sent to each worker as a snapshot and then as changes;
* **lets a restarted worker take its AIDs back at once** (same worker name, new connection), while
  refusing an AID held by another live worker;
* **logs one line per lifecycle event** (connected, registered, disconnected, left, refused, dead
  letter) and counts them (:class:`HostStats`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from autogen_core import TopicId
from autogen_ext.runtimes.grpc._worker_runtime_host_servicer import (
    CallbackChannelConnection,
    GrpcWorkerAgentRuntimeHostServicer,
)
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

from .._errors import RPCForbiddenError
from ._wire import (
    DIRECTORY_TYPE,
    HELLO_TYPE,
    ORIGIN_ATTR,
    WORKER_AGENT_PREFIX,
    WORKER_METADATA,
    control_event,
    event_json,
)

__all__ = ["AUNHostServicer", "HostStats"]

logger = logging.getLogger("aun_runtime.distributed")

HELD, AWAY = "held", "away"


@dataclass
class HostStats:
    """What the host saw, counted."""

    workers_connected: int = 0
    connects: int = 0
    disconnects: int = 0
    registrations: int = 0
    events_routed: int = 0
    not_delivered: int = 0
    rpc_refused: int = 0


@dataclass
class _Group:
    holder: str
    mode: str
    members: set[str] = field(default_factory=set)

    def view(self) -> dict[str, Any]:
        return {"members": sorted(self.members), "mode": self.mode, "holder": self.holder}


class _DataConnection(CallbackChannelConnection[agent_worker_pb2.Message, agent_worker_pb2.Message]):
    """autogen-ext's data connection without its per-message log line, which formats the whole
    message as text even when nobody logs at INFO (most of the host's time per message)."""

    async def _receive_messages(self, client_id: str, request_iterator: AsyncIterator[agent_worker_pb2.Message]) -> None:
        async for message in request_iterator:
            await self._handle_message(message)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("host: routing an event failed", exc_info=task.exception())


def _metadata(context: Any) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ())}


class AUNHostServicer(GrpcWorkerAgentRuntimeHostServicer):
    """autogen-ext's host servicer with the AUN additions described in the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.stats = HostStats()
        self._client_worker: dict[str, str] = {}  # client id -> worker name
        self._aids: dict[str, tuple[str, str, str]] = {}  # aid -> (worker, client id, held|away)
        self._groups: dict[str, _Group] = {}

    # -- data stream -------------------------------------------------------------------------------

    async def OpenChannel(
        self, request_iterator: AsyncIterator[agent_worker_pb2.Message], context: Any
    ) -> AsyncIterator[agent_worker_pb2.Message]:
        """The data stream of one worker connection: what autogen-ext's host does, minus eager logging."""
        client_id = _metadata(context).get("client-id")
        if client_id is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "client-id metadata not found.")
            return

        async def handle(message: agent_worker_pb2.Message) -> None:
            await self._receive_message(client_id, message)

        connection = _DataConnection(request_iterator, client_id, handle_callback=handle)
        self._data_connections[client_id] = connection
        try:
            async for message in connection:
                yield message
        finally:
            self._data_connections.pop(client_id, None)
            for future in self._pending_responses.pop(client_id, {}).values():
                future.cancel()
            await self._on_client_disconnect(client_id)

    async def _receive_message(self, client_id: str, message: agent_worker_pb2.Message) -> None:
        kind = message.WhichOneof("message")
        if kind == "cloudEvent" and message.cloudEvent.type != HELLO_TYPE:
            task = asyncio.get_running_loop().create_task(self._process_event(message.cloudEvent))
            self._background_tasks.add(task)
            task.add_done_callback(self._background_tasks.discard)
            task.add_done_callback(_log_failure)
        elif kind == "request":
            await self._refuse(client_id, message.request)
        elif kind == "cloudEvent" and message.cloudEvent.type == HELLO_TYPE:
            await self._hello(client_id, event_json(message.cloudEvent)["worker"])
        else:
            await super()._receive_message(client_id, message)

    async def _refuse(self, client_id: str, request: agent_worker_pb2.RpcRequest) -> None:
        self.stats.rpc_refused += 1
        worker = self._client_worker.get(client_id, client_id)
        logger.warning("host: refused an RPC from %s to %s: AUN has no request/response", worker, request.target.type)
        connection = self._data_connections.get(client_id)
        if connection is not None:
            response = agent_worker_pb2.RpcResponse(request_id=request.request_id, error=str(RPCForbiddenError()))
            await connection.send(agent_worker_pb2.Message(response=response))

    async def _hello(self, client_id: str, worker: str) -> None:
        self._client_worker[client_id] = worker
        self.stats.connects += 1
        self.stats.workers_connected = len(self._client_worker)
        logger.info("host: worker %s connected (client %s)", worker, client_id[:8])
        snapshot = {
            "snapshot": True,
            "aids": {aid: [w, status] for aid, (w, _, status) in self._aids.items()},
            "groups": {gid: g.view() for gid, g in self._groups.items()},
        }
        connection = self._data_connections.get(client_id)
        if connection is not None:
            await connection.send(control_event(DIRECTORY_TYPE, snapshot))

    async def _process_event(self, event: cloudevent_pb2.CloudEvent) -> None:
        topic = TopicId(event.type, event.source)
        recipients = await self._subscription_manager.get_subscribed_recipients(topic)
        clients = {self._agent_type_to_client_id.get(r.type) for r in recipients} - {None}
        connections = [self._data_connections.get(c) for c in clients if c is not None]
        live = [c for c in connections if c is not None]
        if not live:
            self.stats.not_delivered += 1
            if ORIGIN_ATTR in event.attributes:
                logger.info("host: nobody holds %s now; its sender keeps the message and sends it again", event.type)
            else:
                logger.warning("host: dead letter: no subscriber for topic %s (a plain publish, dropped)", event.type)
            return
        self.stats.events_routed += 1
        message = agent_worker_pb2.Message(cloudEvent=event)
        for connection in live:
            await connection.send(message)

    async def _on_client_disconnect(self, client_id: str) -> None:
        await super()._on_client_disconnect(client_id)
        worker = self._client_worker.pop(client_id, None)
        self.stats.workers_connected = len(self._client_worker)
        if worker is None:
            return
        self.stats.disconnects += 1
        away = {aid: [w, AWAY] for aid, (w, c, _) in self._aids.items() if c == client_id}
        for aid in away:
            w, c, _ = self._aids[aid]
            self._aids[aid] = (w, c, AWAY)
        logger.info("host: worker %s disconnected; %d AIDs away", worker, len(away))
        await self._push({"aids": away})

    # -- registration ------------------------------------------------------------------------------

    async def RegisterAgent(
        self, request: agent_worker_pb2.RegisterAgentTypeRequest, context: Any
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        metadata = _metadata(context)
        client_id, worker = metadata.get("client-id", ""), metadata.get(WORKER_METADATA)
        current = self._agent_type_to_client_id.get(request.type)
        same_worker = worker is not None and self._client_worker.get(current or "") == worker
        if current is not None and current != client_id and same_worker:
            # The same worker on a new connection: the old one is dead or dying. Take over.
            logger.info("host: worker %s reconnected; its old connection is let go", worker)
            await self._on_client_disconnect(current)
        elif current is not None and current != client_id and current in self._client_worker:
            holder = self._client_worker[current]
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f"{request.type} is held by the live worker {holder}")
        response: agent_worker_pb2.RegisterAgentTypeResponse = await super().RegisterAgent(request, context)
        if worker is None or request.type.startswith(WORKER_AGENT_PREFIX):
            return response
        self.stats.registrations += 1
        before = self._aids.get(request.type)
        if before is not None and before[0] != worker:
            logger.info("host: %s moves from worker %s (%s) to worker %s", request.type, before[0], before[2], worker)
        self._aids[request.type] = (worker, client_id, HELD)
        logger.info("host: worker %s registered %s", worker, request.type)
        await self._push({"aids": {request.type: [worker, HELD]}})
        return response

    # -- directory service -------------------------------------------------------------------------

    async def group_call(self, request: dict[str, Any], context: Any) -> dict[str, Any]:
        worker = _metadata(context).get(WORKER_METADATA, "?")
        op, group_id = request["op"], request["group"]
        group = self._groups.get(group_id)
        if op in ("create", "announce"):
            if op == "create" and group is not None and self._holder_live(group.holder) and group.holder != worker:
                return {"error": "exists", "message": f"group {group_id} already exists (held by worker {group.holder})"}
            if op == "create" and group is not None and group.holder == worker and self._holder_live(worker):
                return {"error": "exists", "message": f"group {group_id} already exists"}
            group = self._groups[group_id] = _Group(worker, request["mode"], set(request["members"]))
            logger.info("host: worker %s %s group %s", worker, "created" if op == "create" else "announced", group_id)
        elif group is None:
            return {"error": "unknown", "message": f"no group {group_id!r}; create it with create_group()"}
        elif op == "add":
            group.members.add(request["aid"])
        elif op == "remove":
            group.members.discard(request["aid"])
        elif op == "mode":
            group.mode = request["mode"]
        else:
            return {"error": "unknown", "message": f"unknown group operation {op!r}"}
        await self._push({"groups": {group_id: group.view()}})
        return {"group": group.view()}

    async def leave_call(self, request: dict[str, Any], context: Any) -> dict[str, Any]:
        """A worker stops for good: its AIDs and groups are released, not kept for."""
        metadata = _metadata(context)
        worker = metadata.get(WORKER_METADATA, "?")
        # Let go of its registrations now, not when the connection closes: the next worker to
        # register the same AIDs must not find them taken.
        await super()._on_client_disconnect(metadata.get("client-id", ""))
        released = [aid for aid, (w, _, _) in self._aids.items() if w == worker]
        for aid in released:
            del self._aids[aid]
        groups = [g for g in request.get("groups", []) if g in self._groups and self._groups[g].holder == worker]
        for group_id in groups:
            del self._groups[group_id]
        logger.info("host: worker %s left; released %d AIDs and %d groups", worker, len(released), len(groups))
        await self._push({"aids": dict.fromkeys(released), "groups": dict.fromkeys(groups)})
        return {"released": released}

    async def stats_call(self, request: dict[str, Any], context: Any) -> dict[str, Any]:
        return {
            "stats": self.stats.__dict__,
            "workers": sorted(set(self._client_worker.values())),
            "aids": {aid: [w, s] for aid, (w, _, s) in sorted(self._aids.items())},
            "groups": {gid: g.view() for gid, g in sorted(self._groups.items())},
        }

    def _holder_live(self, worker: str) -> bool:
        return worker in self._client_worker.values()

    async def _push(self, change: dict[str, Any]) -> None:
        message = control_event(DIRECTORY_TYPE, change)
        for client_id in list(self._client_worker):
            connection = self._data_connections.get(client_id)
            if connection is not None:
                await connection.send(message)


def unary_json(handler: Any) -> grpc.RpcMethodHandler:
    from ._wire import decode_json, encode_json

    return grpc.unary_unary_rpc_method_handler(handler, request_deserializer=decode_json, response_serializer=encode_json)
