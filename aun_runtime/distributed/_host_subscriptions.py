"""Subscriptions, kept per connection: each is stored under its client's id, so one client's ids
never meet another's, and a client lists or removes only its own. A service AID takes none: the
host routes its deliveries to its instances (see `._host_routing`).

Apart from the servicer because it is autogen-ext's subscription calls with these rules on top;
the stream rules decide what a stream may subscribe at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import grpc
from autogen_core import Subscription, TypePrefixSubscription, TypeSubscription
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from ..base._autogen_internals import subscription_from_proto, subscription_to_proto
from ._host_directory import HostDirectory
from ._host_records import Refusal, StreamClient
from ._host_stream_rules import StreamRules

__all__ = ["HostSubscriptions", "Subscriptions"]

_Status = grpc.StatusCode


class Subscriptions(Protocol):
    """autogen-ext's subscription manager, as these calls use it."""

    @property
    def subscriptions(self) -> Sequence[Subscription]: ...

    async def add_subscription(self, subscription: Subscription) -> None: ...

    async def remove_subscription(self, id: str) -> None: ...


def _scoped(client_id: str, subscription_id: str) -> str:
    """Subscriptions are kept per connection: one client's ids never meet another's."""
    return f"{client_id}/{subscription_id}"


class HostSubscriptions:
    """The subscription calls of one host. `manager` is autogen-ext's subscription manager and
    `by_client` its map of client id to that client's subscription ids (both shared)."""

    def __init__(self, rules: StreamRules, directory: HostDirectory, manager: Subscriptions, by_client: dict[str, set[str]]) -> None:
        self.rules = rules
        self.directory = directory
        self.manager = manager
        self.by_client = by_client

    async def add(self, client_id: str, client: StreamClient | None, proto: agent_worker_pb2.Subscription) -> None:
        """Add the subscription `proto` of the client `client_id`, if the stream rules allow it."""
        try:
            subscription = subscription_from_proto(proto)
        except ValueError:
            raise Refusal(_Status.INVALID_ARGUMENT, "a subscription is a typeSubscription or a typePrefixSubscription") from None
        agent_type: str = subscription.agent_type  # type: ignore[attr-defined]
        self.rules.check_subscription(client, subscription, self.directory.owns(agent_type))
        if agent_type in self.directory.services:
            # A service AID's deliveries are routed to its instances by the host, not by
            # subscription (and autogen-core keeps one subscription per topic and agent type).
            return
        scoped: Subscription
        if isinstance(subscription, TypeSubscription):
            scoped = TypeSubscription(subscription.topic_type, subscription.agent_type, id=_scoped(client_id, subscription.id))
        else:
            assert isinstance(subscription, TypePrefixSubscription)
            scoped = TypePrefixSubscription(
                subscription.topic_type_prefix, subscription.agent_type, id=_scoped(client_id, subscription.id)
            )
        try:
            await self.manager.add_subscription(scoped)
        except ValueError as exc:
            raise Refusal(_Status.INVALID_ARGUMENT, str(exc)) from None
        self.by_client.setdefault(client_id, set()).add(scoped.id)

    async def remove(self, client_id: str, subscription_id: str) -> None:
        """Remove the client's own subscription `subscription_id`."""
        scoped = _scoped(client_id, subscription_id)
        own = self.by_client.get(client_id, set())
        if scoped not in own:
            raise Refusal(_Status.NOT_FOUND, f"this connection has no subscription {subscription_id[:100]!r}")
        await self.manager.remove_subscription(scoped)
        own.discard(scoped)

    def listed(self, client_id: str) -> list[agent_worker_pb2.Subscription]:
        """The client's own subscriptions (with the ids it gave them)."""
        own = self.by_client.get(client_id, set())
        prefix = _scoped(client_id, "")
        found = []
        for subscription in self.manager.subscriptions:
            if subscription.id in own:
                proto = subscription_to_proto(subscription)
                proto.id = subscription.id[len(prefix) :]
                found.append(proto)
        return found
