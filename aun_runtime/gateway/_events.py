"""What happened in the gateway, for code in the same process: tests, a console, a bridge.

Each event is a kind (``connected``, ``disconnected``, ``token.refreshed``, ``message.stored``,
``group.message.stored``...) and a few fields. The last :data:`GatewayEvents.capacity` are kept;
:meth:`GatewayEvents.wait` returns the first matching one, past or future, so a caller never has
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
        self._changed = asyncio.Condition()
        self._counts: dict[str, int] = {}
        self._waiting = 0

    def emit(self, kind: str, **fields: Any) -> None:
        self._log.append(GatewayEvent(kind, fields))
        self._counts[kind] = self._counts.get(kind, 0) + 1
        if self._waiting:  # only wake waiters if someone waits: emit is on the hot path
            asyncio.ensure_future(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def count(self, kind: str) -> int:
        """How many events of ``kind`` happened since start (including forgotten ones)."""
        return self._counts.get(kind, 0)

    def find(self, kind: str, **expected: Any) -> list[GatewayEvent]:
        return [event for event in self._log if event.matches(kind, expected)]

    async def wait(self, kind: str, *, timeout: float = 10.0, after: float = 0.0, **expected: Any) -> GatewayEvent:
        """The first event of ``kind`` (at or after time ``after``) whose fields equal ``expected``.

        Raises:
            TimeoutError: none happened within ``timeout`` seconds.
        """

        def first() -> GatewayEvent | None:
            return next((e for e in self._log if e.at >= after and e.matches(kind, expected)), None)

        self._waiting += 1
        try:
            async with asyncio.timeout(timeout), self._changed:
                found = first()
                while found is None:
                    await self._changed.wait()
                    found = first()
                return found
        finally:
            self._waiting -= 1
