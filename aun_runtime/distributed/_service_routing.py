"""The host's side of a service AID: its instances and which one gets each delivery.

A service AID is registered by several workers (each an *instance*) with one routing policy:

* `round_robin`: each delivery goes to the next live instance in turn;
* `sender_affinity`: each sending worker's stream goes to one live instance (the one with the
  fewest streams when the sender is first seen) and stays with it while it lives.

An instance whose worker vanishes is *away*: it gets nothing, and the streams it had are given to
the others. Each such change bumps the service's *epoch*, which the host sends in the directory: a
sender that sees a new epoch sends its unacknowledged messages to the AID again from their base,
so what the lost instance had not acknowledged reaches another one (whose shared ledger keeps it
from being handled twice, see `._service_store`).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Any

from protocols.aun import ROUND_ROBIN

__all__ = ["MAX_AFFINITIES", "SERVICE_METADATA", "SERVICE_SECRET_METADATA", "ServiceRoute", "secret_digest"]

#: gRPC metadata key on ``RegisterAgent``: registers the agent type as an instance of a service AID
#: with the routing policy it names.
SERVICE_METADATA = "aun-service"
#: gRPC metadata key on ``RegisterAgent`` next to ``aun-service``: the service's secret, which the
#: instances share (kept beside their ledger). The host binds a service AID to the first one it
#: sees, so that only a process that can read it becomes an instance and receives the AID's messages.
SERVICE_SECRET_METADATA = "aun-service-secret"

#: Sending workers whose instance a service remembers; past it the oldest are forgotten (and are
#: given an instance again when they next send).
MAX_AFFINITIES = 100_000


def secret_digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


@dataclass
class ServiceRoute:
    """One service AID at the host: `secret` is the digest of its instances' shared secret."""

    policy: str
    secret: bytes
    instances: dict[str, str | None] = field(default_factory=dict)  # worker -> client id (None: away)
    epoch: int = 0
    _turn: int = 0
    _affinity: dict[str, str] = field(default_factory=dict)  # sending worker -> instance worker

    def admits(self, secret: str) -> bool:
        """Whether `secret` is the one this service's first instance presented."""
        return hmac.compare_digest(secret_digest(secret), self.secret)

    def live(self) -> list[str]:
        return [w for w, c in self.instances.items() if c is not None]

    def join(self, worker: str, client_id: str) -> None:
        self.instances[worker] = client_id

    def lost(self, client_id: str) -> str | None:
        """The connection `client_id` closed: its instance (if it was one) is away now."""
        for worker, current in self.instances.items():
            if current == client_id:
                self.instances[worker] = None
                self._forget(worker)
                self.epoch += 1
                return worker
        return None

    def leave(self, worker: str) -> bool:
        """`worker` left for good; True if the service has no instance left."""
        if self.instances.pop(worker, None) is not None or worker in self._affinity.values():
            self.epoch += 1
        self._forget(worker)
        return not self.instances

    def _forget(self, worker: str) -> None:
        for origin in [o for o, w in self._affinity.items() if w == worker]:
            del self._affinity[origin]

    def pick(self, origin: str | None) -> str | None:
        """The client id of the instance that gets a delivery from `origin`; None if none is live."""
        live = self.live()
        if not live:
            return None
        if self.policy == ROUND_ROBIN or origin is None:
            self._turn = (self._turn + 1) % len(live)
            return self.instances[live[self._turn]]
        worker = self._affinity.get(origin)
        if worker is None or self.instances.get(worker) is None:
            load = {w: 0 for w in live}
            for assigned in self._affinity.values():
                if assigned in load:
                    load[assigned] += 1
            worker = min(live, key=lambda w: (load[w], w))
            if len(self._affinity) >= MAX_AFFINITIES:
                del self._affinity[next(iter(self._affinity))]
            self._affinity[origin] = worker
        return self.instances[worker]

    def streams(self) -> dict[str, int]:
        """Sending workers per instance (sender affinity)."""
        counts = dict.fromkeys(self.instances, 0)
        for worker in self._affinity.values():
            counts[worker] = counts.get(worker, 0) + 1
        return counts

    def view(self) -> dict[str, Any]:
        """What the directory and `aun-runtime status` show."""
        return {
            "policy": self.policy,
            "epoch": self.epoch,
            "instances": {w: ("live" if c is not None else "away") for w, c in sorted(self.instances.items())},
        }
