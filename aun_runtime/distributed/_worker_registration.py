"""What a worker holds, told to its host: its AIDs and subscriptions, registered on every session.

Apart from the worker because it is the one part that speaks autogen-ext's registration calls: the
host forgets a worker's registrations when its session ends, so each new session registers
everything again (`register_all`), and what the app adds between sessions waits for the next one.
"""

from __future__ import annotations

import asyncio
import logging

import grpc
from autogen_core import Subscription, TypeSubscription
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from ..base._errors import AgentRegistrationError
from ._directory_view import DirectoryView
from ._link import HostLink
from ._wire import ACK_PREFIX, WORKER_AGENT_PREFIX
from ._worker_services import ServiceInstances

__all__ = ["REGISTRATION_WAIT", "WorkerRegistration"]

logger = logging.getLogger("aun_runtime.distributed")

#: Seconds a registration waits for the host to let go of the same AID held by a connection that
#: is closing (a worker just stopped, or killed and restarted).
REGISTRATION_WAIT = 10.0


class WorkerRegistration:
    """The agent types and subscriptions of one worker, and their registration with the host.

    Args:
        worker: the worker's name (its own agent, which receives acknowledgements, is registered first).
        link: the link to the host (registrations go on its current session).
        directory: the worker's view of the directory (an AID registered here is marked held).
        services: the worker's service AIDs (registered with their policy and secret).
    """

    def __init__(self, worker: str, link: HostLink, directory: DirectoryView, services: ServiceInstances) -> None:
        self._worker = worker
        self._link = link
        self._directory = directory
        self._services = services
        self._types: list[str] = [WORKER_AGENT_PREFIX + worker]
        self._subscriptions: list[Subscription] = [TypeSubscription(ACK_PREFIX + worker, WORKER_AGENT_PREFIX + worker)]

    def held_aids(self) -> list[str]:
        """The AIDs this worker has registered with the host (its own internal agents left out)."""
        return [t for t in self._types if not t.startswith(WORKER_AGENT_PREFIX)]

    def log_held(self) -> None:
        """Log one line with the AIDs this worker holds."""
        held = self.held_aids()
        logger.info("worker %s: registered %d AIDs: %s", self._worker, len(held), ", ".join(held) or "-")

    async def add_type(self, agent_type: str) -> None:
        """Hold `agent_type`: registered now if a session is up, else with the next one."""
        self._types.append(agent_type)
        if self._link.connected:
            await self._register(agent_type)

    async def add_subscription(self, subscription: Subscription) -> None:
        self._subscriptions.append(subscription)
        if self._link.connected:
            await self._subscribe(subscription)

    async def remove_subscription(self, id: str) -> None:
        self._subscriptions = [s for s in self._subscriptions if s.id != id]
        if self._link.connected:
            await self._link.stub.RemoveSubscription(
                agent_worker_pb2.RemoveSubscriptionRequest(id=id), metadata=self._link.metadata
            )

    async def register_all(self, *, started: bool) -> None:
        """A session has its snapshot: register every type and subscription again.

        Raises:
            AgentRegistrationError: another worker holds one of the AIDs, and the worker is not
                `started` yet (at start, a conflict is the caller's to fix). Once started, the
                conflict is logged and the worker keeps its other AIDs.
        """
        lost: set[str] = set()
        for agent_type in list(self._types):
            try:
                await self._register(agent_type)
            except AgentRegistrationError as exc:
                if not started:
                    raise
                # Another worker took it while this one was cut off: say so, serve the rest.
                logger.error("worker %s: %s; it keeps its other AIDs", self._worker, exc)
                lost.add(agent_type)
        for subscription in list(self._subscriptions):
            if getattr(subscription, "agent_type", None) not in lost:
                await self._subscribe(subscription)

    async def _register(self, agent_type: str) -> None:
        deadline = asyncio.get_running_loop().time() + REGISTRATION_WAIT
        while True:
            metadata = [*self._link.metadata, *self._services.registration_metadata(agent_type)]
            try:
                await self._link.stub.RegisterAgent(
                    agent_worker_pb2.RegisterAgentTypeRequest(type=agent_type), metadata=metadata
                )
                if not agent_type.startswith(WORKER_AGENT_PREFIX):
                    self._directory.mark_held(agent_type, "service" if self._services.is_service(agent_type) else self._worker)
                return
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.PERMISSION_DENIED):
                    raise AgentRegistrationError(exc.details()) from None
                if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
                if asyncio.get_running_loop().time() > deadline:
                    raise AgentRegistrationError(f"{agent_type}: {exc.details()}") from None
                await asyncio.sleep(0.05)  # the host is still letting go of a closing connection

    async def _subscribe(self, subscription: Subscription) -> None:
        from ..base._autogen_internals import subscription_to_proto

        await self._link.stub.AddSubscription(
            agent_worker_pb2.AddSubscriptionRequest(subscription=subscription_to_proto(subscription)),
            metadata=self._link.metadata,
        )
