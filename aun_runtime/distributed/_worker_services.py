"""The service AIDs a worker holds as one instance among several: their policies, ledgers and claims.

Apart from the worker because a plain worker has none of it: the policies are checked before
anything opens, each service AID gets its shared ledger and its `ServiceInbound`
(`._service_inbound`), and what the worker's journal commits, what its upkeep retries and what its
stop settles is passed to them here. The worker only asks: is this AID a service, and with which
policy and secret does it register it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ._acks import Acknowledger
from ._journal import Delivery, JournalArchive
from ._service_inbound import ServiceInbound, Spawn
from ._service_routing import SERVICE_METADATA, SERVICE_SECRET_METADATA
from ._service_store import POLICIES, open_ledger

__all__ = ["ServiceInstances"]


class ServiceInstances:
    """This worker's service AIDs, each with its policy and, once opened, its ledger.

    Args:
        policies: `{aid: routing policy}` (`"round_robin"` or `"sender_affinity"`).
        archive: where the worker's journal is (a service instance needs a durable one).

    Raises:
        ValueError: an unknown policy, or services with an in-memory archive.
    """

    def __init__(self, policies: Mapping[str, str], archive: str | Path) -> None:
        for aid, policy in policies.items():
            if policy not in POLICIES:
                raise ValueError(f"service {aid}: unknown policy {policy!r}; one of {', '.join(POLICIES)}")
        if policies and str(archive) == ":memory:":
            raise ValueError("a service instance needs a durable archive: its journal proves what it handled")
        self._policies = dict(policies)
        #: The opened instances by AID (filled in place by `open`: the receiving side reads it as is).
        self.by_aid: dict[str, ServiceInbound] = {}
        self._journal: JournalArchive | None = None
        self._acks: Acknowledger | None = None

    def open(
        self, location: str | Path | None, *, instance: str, journal: JournalArchive, acks: Acknowledger, spawn: Spawn
    ) -> None:
        """Open each service AID's ledger (see `open_ledger` for `location`); `spawn` hands a claimed
        delivery `(origin, aid, seq, event)` to its agent."""
        self._journal, self._acks = journal, acks
        for aid, policy in self._policies.items():
            ledger = open_ledger(location, aid=aid, instance=instance, journal=journal)
            self.by_aid[aid] = ServiceInbound(aid, ledger, policy, spawn=spawn, ack=self._ack)

    def _ack(self, origin: str, aid: str, through: int) -> None:
        assert self._acks is not None and self._journal is not None
        self._acks.due({origin: {aid: through}})
        self._journal.forget_service_handled(origin, aid, through)

    def registration_metadata(self, aid: str) -> list[tuple[str, str]]:
        """What registering `aid` adds to the call: its policy and the service's secret (none for a plain AID)."""
        policy = self._policies.get(aid)
        if policy is None:
            return []
        return [(SERVICE_METADATA, policy), (SERVICE_SECRET_METADATA, self.by_aid[aid].ledger.secret)]

    def is_service(self, aid: str) -> bool:
        return aid in self._policies

    @property
    def duplicates(self) -> int:
        """Resent deliveries skipped, over all service AIDs."""
        return sum(service.duplicates for service in self.by_aid.values())

    def abandoned(self, scope: Delivery) -> None:
        """A delivery was cancelled half-way: a service AID's claim on it waits for the ledger's settling."""
        service = self.by_aid.get(scope.aid) if scope.service else None
        if service is not None:
            service.abandoned(scope.origin, scope.seq)

    def abandon(self, origin: str, aid: str, seq: int) -> None:
        """A claimed delivery is not handed on (the worker is stopping): its claim is settled on the way out."""
        self.by_aid[aid].abandoned(origin, seq)

    def committed(self, handled: list[tuple[str, str, int]]) -> None:
        """The journal committed these `(origin, aid, seq)` handlings: each service marks its own."""
        by_aid: dict[str, list[tuple[str, int]]] = {}
        for origin, aid, seq in handled:
            by_aid.setdefault(aid, []).append((origin, seq))
        for aid, items in by_aid.items():
            self.by_aid[aid].committed(items)

    def mark(self) -> None:
        """Mark in the ledgers what a busy ledger refused last time (the worker's upkeep calls it)."""
        for service in self.by_aid.values():
            service.mark()

    def settle(self) -> None:
        """Nothing is in flight: settle this instance's open claims in each service ledger."""
        journal = self._journal
        for aid, service in self.by_aid.items():
            service.mark()
            if journal is not None:
                service.ledger.settle(lambda origin, seq, aid=aid: journal.service_handled(origin, aid, seq))  # type: ignore[misc]

    def close(self) -> None:
        for service in self.by_aid.values():
            service.ledger.close()
