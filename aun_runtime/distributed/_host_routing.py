"""Where the host sends what passed a stream's rules: to the subscribers of its topic, or, for a
delivery to a service AID, to one live instance as the service's policy says (see
`._service_routing`). An RPC is answered at once with an error: AUN has no request/response.

Apart from the servicer because it is the forwarding half of the data stream, the host's hot
path: it reads autogen-ext's subscriptions and connections (shared, never copied) and the
directory's service AIDs, and counts what it routed and what it could not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from autogen_core import AgentId, TopicId
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

from ..base._errors import RPCForbiddenError
from ..base._topics import INBOX_PREFIX
from ._host_records import HostStats, StreamClient
from ._host_streams import Sends
from ._service_routing import ServiceRoute
from ._wire import ORIGIN_ATTR

__all__ = ["HostRouter", "Recipients"]

logger = logging.getLogger("aun_runtime.distributed")


class Recipients(Protocol):
    """autogen-ext's subscriptions, as routing asks them: who subscribes to a topic."""

    async def get_subscribed_recipients(self, topic: TopicId) -> list[AgentId]: ...


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("host: routing an event failed", exc_info=task.exception())


class HostRouter:
    """Routes events to the streams that should have them, each message or frame in one task."""

    def __init__(
        self,
        stats: HostStats,
        services: Mapping[str, ServiceRoute],
        subscriptions: Recipients,
        agent_types: Mapping[str, str],
        connections: Mapping[str, Sends],
        tasks: set[asyncio.Task[Any]],
    ) -> None:
        self.stats = stats
        self.services = services
        self.subscriptions = subscriptions
        self.agent_types = agent_types  # agent type -> the client id it is registered on
        self.connections = connections
        self.tasks = tasks  # kept until done, so that none is collected while it runs

    def route(self, events: Sequence[cloudevent_pb2.CloudEvent]) -> None:
        """Route `events` in order, in one task (one per message or frame, not per event)."""
        if not events:
            return
        task = asyncio.get_running_loop().create_task(self._process_events(events))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(_log_failure)

    async def _process_events(self, events: Sequence[cloudevent_pb2.CloudEvent]) -> None:
        if len(events) == 1:
            await self.process_event(events[0])  # a failure is logged by the task's callback
            return
        for event in events:
            try:
                await self.process_event(event)
            except Exception:  # as with one task per event: one failure does not stop the others
                logger.exception("host: routing an event of a batch frame failed")

    async def process_event(self, event: cloudevent_pb2.CloudEvent) -> None:
        """Send one event to every stream subscribed to its topic (or to a service's instance)."""
        if self.services and event.type.startswith(INBOX_PREFIX):
            service = self.services.get(event.type[len(INBOX_PREFIX) :])
            if service is not None:
                await self._route_to_instance(service, event)
                return
        topic = TopicId(event.type, event.source)
        recipients = await self.subscriptions.get_subscribed_recipients(topic)
        clients = {self.agent_types.get(r.type) for r in recipients} - {None}
        connections = [self.connections.get(c) for c in clients if c is not None]
        live = [c for c in connections if c is not None]
        if not live:
            self.stats.not_delivered += 1
            if ORIGIN_ATTR in event.attributes:
                logger.info("host: nobody holds %s now; its sender keeps the message and sends it again", event.type)
            else:
                logger.warning("host: dead letter: no subscriber for topic %r (a plain publish, dropped)", event.type[:200])
            return
        self.stats.events_routed += 1
        message = agent_worker_pb2.Message(cloudEvent=event)
        for connection in live:
            await connection.send(message)

    async def _route_to_instance(self, service: ServiceRoute, event: cloudevent_pb2.CloudEvent) -> None:
        origin = event.attributes.get(ORIGIN_ATTR)
        client_id = service.pick(origin.ce_string if origin is not None else None)
        connection = self.connections.get(client_id) if client_id is not None else None
        if connection is None:
            self.stats.not_delivered += 1
            logger.info("host: no live instance of %s now; its sender keeps the message and sends it again", event.type)
            return
        self.stats.events_routed += 1
        await connection.send(agent_worker_pb2.Message(cloudEvent=event))

    async def refuse_rpc(self, client: StreamClient, request: agent_worker_pb2.RpcRequest) -> None:
        """Answer an RPC at once with an error, instead of forwarding it (or letting it hang)."""
        self.stats.rpc_refused += 1
        logger.warning("host: refused an RPC from %s to %r: AUN has no request/response", client.who, request.target.type[:100])
        connection = self.connections.get(client.client_id)
        if connection is not None:
            response = agent_worker_pb2.RpcResponse(request_id=request.request_id, error=str(RPCForbiddenError()))
            await connection.send(agent_worker_pb2.Message(response=response))
