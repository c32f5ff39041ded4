"""What arrives on a worker's host stream, sent where it goes; and what a commit lets it acknowledge.

Apart from the worker because it is the receiving half of its traffic: a directory change goes to
the directory view, an acknowledgement to the outbox, a delivery to a plain AID through its stream
position (`._inbound`) or to a service AID through its ledger (`._service_inbound`), a plain
autogen-ext publish straight to the delivery path, and an RPC request is refused. When the journal
commits, the positions it made durable are acknowledged to their senders from here too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from typing import Any

from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from ..base._errors import RPCForbiddenError
from ..base._topics import INBOX_PREFIX
from ._acks import Acknowledger
from ._directory_view import DirectoryView
from ._inbound import Inbound
from ._journal import Commit, Delivery
from ._outbox import Outbox
from ._returning import ReturningPublishes
from ._wire import ACK_PREFIX, BASE_ATTR, DIRECTORY_TYPE, ORIGIN_ATTR, SEQ_ATTR, event_json
from ._worker_delivery import DeliveryPath
from ._worker_services import ServiceInstances

__all__ = ["HostMessages"]

logger = logging.getLogger("aun_runtime.distributed")


class HostMessages:
    """The worker's reader of the host stream (the link's `on_message`) and listener of its journal's commits.

    Args:
        worker: the worker's name (for the log).
        held: the agent types this worker holds (a delivery to any other is left to its sender's retry).
        directory: the worker's view of the directory.
        outbox: the worker's outbox (acknowledgements settle it).
        inbound: the plain AIDs' stream positions.
        services: the worker's service AIDs.
        deliveries: hands a delivery to its agent.
        acks: acknowledges what is handled and committed.
        returning: the plain publishes `idle` waits for.
        send: puts a message on the host stream (the refusal of an RPC).
        changed: called whenever something `idle` waits on moved.
    """

    def __init__(
        self,
        worker: str,
        held: Container[str],
        *,
        directory: DirectoryView,
        outbox: Outbox,
        inbound: Inbound,
        services: ServiceInstances,
        deliveries: DeliveryPath,
        acks: Acknowledger,
        returning: ReturningPublishes,
        send: Callable[[agent_worker_pb2.Message], bool],
        changed: Callable[[], None],
    ) -> None:
        self._worker = worker
        self._held = held
        self._directory = directory
        self._outbox = outbox
        self._inbound = inbound
        self._services = services
        self._service_of = services.by_aid
        self._deliveries = deliveries
        self._acks = acks
        self._returning = returning
        self._send = send
        self._changed = changed
        #: Set while the worker stops: nothing new is handed to an agent (its sender sends it again).
        self.closing = False

    def on_message(self, message: agent_worker_pb2.Message) -> None:
        """One message from the host."""
        kind = message.WhichOneof("message")
        if kind == "request":
            self._refuse_rpc(message.request)
            return
        if kind != "cloudEvent":
            return
        event = message.cloudEvent
        topic = event.type
        if topic == DIRECTORY_TYPE:
            self._directory.apply(event_json(event))
            self._changed()
        elif topic.startswith(ACK_PREFIX):
            for aid, through in event_json(event)["acks"].items():
                self._outbox.acknowledged(aid, int(through))
            self._changed()
        elif self.closing:
            return  # stopping: not acknowledged, so its sender sends it again to the next run
        elif topic.startswith(INBOX_PREFIX) and ORIGIN_ATTR in event.attributes:
            attributes = event.attributes
            origin = attributes[ORIGIN_ATTR].ce_string
            aid = topic[len(INBOX_PREFIX) :]
            if aid not in self._held:
                logger.warning("worker %s: got a delivery for %s, which it does not hold; the sender will retry", self._worker, aid)
                return
            service = self._service_of.get(aid)
            if service is not None:
                service.accept(origin, attributes[SEQ_ATTR].ce_integer, attributes[BASE_ATTR].ce_integer, event)
                return
            ready, reack = self._inbound.accept(
                origin, aid, attributes[SEQ_ATTR].ce_integer, attributes[BASE_ATTR].ce_integer, event
            )
            for seq, item in ready:
                self._deliveries.spawn(Delivery(origin, aid, seq), item)
            if reack:
                self._acks.due({origin: {aid: self._inbound.position(origin, aid)}})
        else:  # a plain autogen-ext publish: best effort
            task = self._deliveries.spawn(None, event)
            task.add_done_callback(lambda _, message_id=event.id: self._came_back(message_id))  # type: ignore[misc]

    def spawn_service(self, origin: str, aid: str, seq: int, event: Any) -> None:
        """Hand a delivery its service's ledger let this instance claim to the agent."""
        if self.closing:  # claimed as the worker began to stop: its claim is settled on the way out
            self._services.abandon(origin, aid, seq)
            return
        self._deliveries.spawn(Delivery(origin, aid, seq, service=True), event)

    def _came_back(self, message_id: str) -> None:
        """A plain publish's copy was handled here: if this worker sent it, idle waits no longer."""
        self._returning.returned(message_id)
        self._changed()

    def on_commit(self, commit: Commit) -> None:
        """The journal committed: settle the outbox, acknowledge the handled, mark the services' handlings."""
        if commit.outbox:
            self._outbox.committed(commit.outbox)
        if commit.handled:
            self._acks.due(self._inbound.committed(commit.handled))
        if commit.service:
            self._services.committed(commit.service)
        self._changed()

    def _refuse_rpc(self, request: agent_worker_pb2.RpcRequest) -> None:
        logger.warning("worker %s: refused an RPC to %s: AUN has no request/response", self._worker, request.target.type)
        self._send(
            agent_worker_pb2.Message(
                response=agent_worker_pb2.RpcResponse(request_id=request.request_id, error=str(RPCForbiddenError()))
            )
        )
