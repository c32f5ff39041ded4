"""What happened in the gateway, for code in the same process: tests, a console, a bridge.

Each event is a kind (`connected`, `disconnected`, `token.refreshed`, `message.stored`,
`group.message.stored`...) and a few fields. The last `GatewayEvents.capacity` are kept;
[`GatewayEvents.wait`][aun_runtime.gateway.GatewayEvents.wait] returns the first matching one, past or future, so a caller never has
to sleep and poll.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GatewayEvent", "GatewayEvents"]


@dataclass(frozen=True, slots=True)
class GatewayEvent:
    kind: str
    fields: dict[str, Any]
    at: float = field(default_factory=time.time)

    def matches(self, kind: str, expected: dict[str, Any]) -> bool:
        return self.kind == kind and all(self.fields.get(key) == value for key, value in expected.items())


class GatewayEvents:
    """A bounded log of gateway events with waiters."""

    #: Events kept for late waiters; older ones are forgotten (they were logged, nothing else).
    capacity = 4096

    def __init__(self) -> None:
        self._log: deque[GatewayEvent] = deque(maxlen=self.capacity)
        self._counts: dict[str, int] = {}
        self._waiters: list[tuple[str, dict[str, Any], float, asyncio.Future[GatewayEvent]]] = []

    def emit(self, kind: str, **fields: Any) -> None:
        event = GatewayEvent(kind, fields)
        self._log.append(event)
        self._counts[kind] = self._counts.get(kind, 0) + 1
        if self._waiters:  # resolve waiters in place: no task per event on the hot path
            for waiter in list(self._waiters):
                wanted, expected, after, future = waiter
                if not future.done() and event.at >= after and event.matches(wanted, expected):
                    future.set_result(event)

    def count(self, kind: str) -> int:
        """How many events of `kind` happened since start (including forgotten ones)."""
        return self._counts.get(kind, 0)

    def find(self, kind: str, **expected: Any) -> list[GatewayEvent]:
        return [event for event in self._log if event.matches(kind, expected)]

    async def wait(self, kind: str, *, timeout: float = 10.0, after: float = 0.0, **expected: Any) -> GatewayEvent:
        """The first event of `kind` (at or after time `after`) whose fields equal `expected`.

        Raises:
            TimeoutError: none happened within `timeout` seconds.
        """
        found = next((e for e in self._log if e.at >= after and e.matches(kind, expected)), None)
        if found is not None:
            return found
        future: asyncio.Future[GatewayEvent] = asyncio.get_running_loop().create_future()
        waiter = (kind, expected, after, future)
        self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiters.remove(waiter)
