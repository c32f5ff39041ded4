"""Who may register which AID: a plain AID keeps the worker that registered it (held or away) until
that worker leaves; the same worker on a new connection takes it back at once. An AID that several
workers register as *instances* of a service (with the `aun-service` metadata naming its routing
policy, and the secret of the instances' ledger) is routed by the host; a registration that mixes
the two, or two policies, is refused with `ALREADY_EXISTS`.

Apart from the servicer because it is the one place where autogen-ext's map of agent types to
connections and the directory's ownership are changed together; it asks the stream rules whether
the name may be registered at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import grpc
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from ._host_directory import HostDirectory
from ._host_records import HELD, HostStats, Refusal, StreamClient
from ._host_stream_rules import StreamRules
from ._host_streams import HostStreams
from ._service_routing import SERVICE_METADATA, SERVICE_SECRET_METADATA, ServiceRoute, secret_digest
from ._service_store import POLICIES
from ._wire import WORKER_AGENT_PREFIX

__all__ = ["HostRegistration"]

logger = logging.getLogger("aun_runtime.distributed")

_Status = grpc.StatusCode


class HostRegistration:
    """Registers agent types on streams. `agent_types` and `lock` are autogen-ext's (shared);
    `disconnect(client_id)` lets go of a worker's old connection when it registers on a new one."""

    def __init__(
        self,
        stats: HostStats,
        rules: StreamRules,
        directory: HostDirectory,
        streams: HostStreams,
        agent_types: dict[str, str],
        lock: asyncio.Lock,
        disconnect: Callable[[str], Awaitable[None]],
    ) -> None:
        self.stats = stats
        self.rules = rules
        self.directory = directory
        self.streams = streams
        self.agent_types = agent_types  # agent type -> the client id it is registered on
        self.lock = lock
        self.disconnect = disconnect

    async def register(
        self, client_id: str, client: StreamClient | None, agent_type: str, metadata: dict[str, str]
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        """Register `agent_type` on the stream `client_id` (`client` None: a plain client's)."""
        worker = client.worker if client is not None else None
        self.rules.check_agent_type(agent_type, worker)
        policy = metadata.get(SERVICE_METADATA)
        if policy is not None or agent_type in self.directory.services:
            return await self._register_instance(client_id, client, agent_type, policy, metadata.get(SERVICE_SECRET_METADATA))
        claim = self.directory.aids.get(agent_type)
        if claim is not None and claim[0] != worker:
            owner, _, status = claim
            if status == HELD:
                raise Refusal(_Status.ALREADY_EXISTS, f"{agent_type} is held by the live worker {owner}")
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{agent_type} belongs to worker {owner}, which is away: messages to it are kept for that worker, "
                "and no other worker may register it until that one leaves",
            )
        current = self.agent_types.get(agent_type)
        if current is not None and current != client_id:
            holder = self.streams.clients.get(current)
            if holder is not None and worker is not None and holder.worker == worker:
                # The same worker (same name, same secret) on a new connection: the old one is dead
                # or dying. Take over.
                logger.info("host: worker %s reconnected; its old connection is let go", worker)
                await self.disconnect(current)
            elif holder is not None and holder.worker is not None:
                raise Refusal(_Status.ALREADY_EXISTS, f"{agent_type} is held by the live worker {holder.worker}")
            else:  # a plain client holds it, or a closing connection still does: the caller may retry
                raise Refusal(
                    _Status.INVALID_ARGUMENT, f"{agent_type} is registered on another connection", level=logging.DEBUG
                )
        async with self.lock:
            existing = self.agent_types.get(agent_type)
            if existing is not None and existing != client_id:
                raise Refusal(_Status.INVALID_ARGUMENT, f"{agent_type} is registered on another connection", level=logging.DEBUG)
            self.agent_types[agent_type] = client_id
        if client is not None:
            client.types.add(agent_type)
        response = agent_worker_pb2.RegisterAgentTypeResponse()
        if worker is None or agent_type.startswith(WORKER_AGENT_PREFIX):
            return response
        self.stats.registrations += 1
        self.directory.aids[agent_type] = (worker, client_id, HELD)
        await self.directory.remember()
        logger.info("host: worker %s registered %s", worker, agent_type)
        await self.streams.push({"aids": {agent_type: [worker, HELD]}})
        return response

    async def _register_instance(
        self, client_id: str, client: StreamClient | None, aid: str, policy: str | None, secret: str | None
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        """A worker registers an instance of the service AID `aid` (`policy` None: it asked for a
        plain registration of an AID that is a service), proving with `secret` that it shares the
        instances' ledger."""
        if client is None or client.worker is None:
            raise Refusal(_Status.PERMISSION_DENIED, f"{aid} is a service AID: only workers register its instances")
        worker = client.worker
        service = self.directory.services.get(aid)
        if policy is None:
            assert service is not None
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{aid} is a service AID ({service.policy}) of workers {', '.join(sorted(service.instances))}: "
                f"register it as a service instance with policy {service.policy}, or use another AID",
            )
        if policy not in POLICIES:
            raise Refusal(_Status.INVALID_ARGUMENT, f"unknown service policy {policy[:40]!r}; one of {', '.join(POLICIES)}")
        claim = self.directory.aids.get(aid)
        holder = self.agent_types.get(aid)
        if claim is not None or holder is not None:
            owner = claim[0] if claim is not None else "a plain client"
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{aid} is held as a plain AID by {'worker ' if claim is not None else ''}{owner}: it cannot be a service "
                "AID until that holder leaves",
            )
        if not secret:
            raise Refusal(_Status.PERMISSION_DENIED, f"a service instance of {aid} presents the service's secret ({SERVICE_SECRET_METADATA})")
        if service is not None and not service.admits(secret):
            raise Refusal(
                _Status.PERMISSION_DENIED,
                f"{aid}: this is not the secret of the service's instances (the file beside their ledger,"
                " <aid>.service.sqlite.secret): an instance must share their ledger",
            )
        if service is not None and service.policy != policy:
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{aid} is a service AID with policy {service.policy}, not {policy}: every instance uses the same policy",
            )
        if service is None:
            service = self.directory.services[aid] = ServiceRoute(policy, secret_digest(secret))
        service.join(worker, client_id)
        client.types.add(aid)
        await self.directory.remember()
        self.stats.registrations += 1
        logger.info("host: worker %s registered %s as an instance (%s, %d live)", worker, aid, policy, len(service.live()))
        await self.streams.push({"aids": {aid: self.directory.service_entry(aid)}})
        return agent_worker_pb2.RegisterAgentTypeResponse()
