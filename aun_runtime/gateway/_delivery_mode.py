"""A connection's `delivery_mode`: how the direct messages of its AID are spread over its connections.

`auth.connect` may carry `delivery_mode: {mode, routing, affinity_ttl_ms}` (the AUN client
always sends it; without it a connection is `fanout`):

* `fanout` (the default): every long connection of the AID gets every message, each with its own
  cursors. What a user with a phone and a laptop wants.
* `queue`: each message goes to one connection of the AID, a *queue member*; several runtimes
  serving one AID share its work. `routing` picks the member: `round_robin` (the default) in
  turn, or `sender_affinity`, the same member for every message of one sender while it stays
  online (best effort: when it goes, the sender moves to another one; `affinity_ttl_ms` > 0 also
  lets a sender move after that long without a message, 0 keeps it as long as the member is there).

All online connections of one AID must declare the same mode (mode, routing and affinity time):
the first one online sets it, and `auth.connect` with another is refused with
`ErrorCode.CONNECT_CONFLICT` and `data.reason` `delivery_mode_conflict` (retryable: the
conflict ends when the other connections go). `DeliveryMode` is the parsed value; the queue
itself is `._queue`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocols.aun import QUEUE_ROUTINGS, ROUND_ROBIN, SENDER_AFFINITY

from ._errors import RPCError

__all__ = ["FANOUT", "MAX_AFFINITY_TTL_MS", "DeliveryMode"]

#: The longest ``affinity_ttl_ms`` accepted (a day): past it, say 0 (keep the member while online).
MAX_AFFINITY_TTL_MS = 24 * 3600 * 1000
_MODES = ("fanout", "queue")


@dataclass(frozen=True, slots=True)
class DeliveryMode:
    """One connection's declared delivery mode, normalised the way the AUN client normalises it.

    Attributes:
        mode: `fanout` or `queue`.
        routing: for `queue`, `round_robin` or `sender_affinity`; empty for `fanout`.
        affinity_ttl_ms: for `queue` with `sender_affinity`, how long a sender stays with its
            member without sending (0: while the member is online); 0 otherwise.
    """

    mode: str = "fanout"
    routing: str = ""
    affinity_ttl_ms: int = 0

    @property
    def queue(self) -> bool:
        return self.mode == "queue"

    @property
    def affinity(self) -> bool:
        return self.routing == SENDER_AFFINITY

    def to_wire(self) -> dict[str, Any]:
        return {"mode": self.mode, "routing": self.routing, "affinity_ttl_ms": self.affinity_ttl_ms}

    @classmethod
    def from_params(cls, raw: Any) -> DeliveryMode:
        """The mode `auth.connect` declares: absent or null is fanout, a bare string is the mode.

        Raises:
            RPCError: -32602 naming `delivery_mode`, `delivery_mode.mode`, `.routing` or
                `.affinity_ttl_ms`.
        """
        if raw is None:
            return FANOUT
        if isinstance(raw, str):
            raw = {"mode": raw}
        if not isinstance(raw, dict):
            raise RPCError.bad_param("delivery_mode", "'delivery_mode' must be an object {mode, routing, affinity_ttl_ms}")
        mode = _word(raw, "mode") or "fanout"
        if mode not in _MODES:
            raise RPCError.bad_param("delivery_mode.mode", "'delivery_mode.mode' must be 'fanout' or 'queue'")
        if mode == "fanout":  # routing and affinity mean nothing here (the client sends them empty)
            return FANOUT
        routing = _word(raw, "routing") or ROUND_ROBIN
        if routing not in QUEUE_ROUTINGS:
            raise RPCError.bad_param(
                "delivery_mode.routing", f"'delivery_mode.routing' must be one of {_spelled(QUEUE_ROUTINGS)}"
            )
        ttl = raw.get("affinity_ttl_ms", 0)
        if ttl is None:
            ttl = 0
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_AFFINITY_TTL_MS:
            raise RPCError.bad_param(
                "delivery_mode.affinity_ttl_ms",
                f"'delivery_mode.affinity_ttl_ms' must be an integer from 0 to {MAX_AFFINITY_TTL_MS}",
            )
        return cls("queue", routing, ttl if routing == SENDER_AFFINITY else 0)


def _spelled(words: tuple[str, ...]) -> str:
    return " or ".join(repr(word) for word in words)


def _word(raw: dict[str, Any], name: str) -> str:
    value = raw.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 32:
        raise RPCError.bad_param(f"delivery_mode.{name}", f"'delivery_mode.{name}' must be a short string")
    return value.strip().lower()


FANOUT = DeliveryMode()
