"""Acknowledgements: what this worker has handled and committed, told to the workers that sent it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from ._wire import ACK_PREFIX, WORKER_AGENT_PREFIX, control_event

__all__ = ["ACK_INTERVAL", "Acknowledger"]

#: Seconds between two acknowledgements from this worker: a busy or chatty worker sends one per
#: interval (for every sender and stream at once) instead of one per message or commit.
ACK_INTERVAL = 0.005


class Acknowledger:
    """Collects stream positions per sending worker and sends them, coalesced.

    Acknowledgements wait while the worker is not registered with the host (a session being set
    up): the host takes an acknowledgement only for AIDs registered on the stream it comes on.

    Args:
        worker: this worker's name.
        send: puts a message on the host stream.
        ready: whether the current session has registered this worker's AIDs.
    """

    def __init__(
        self,
        worker: str,
        send: Callable[[agent_worker_pb2.Message], bool],
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self._worker = worker
        self._send = send
        self._ready = ready
        self._due: dict[str, dict[str, int]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0

    @property
    def pending(self) -> bool:
        return bool(self._due)

    def due(self, acks: Mapping[str, Mapping[str, int]]) -> None:
        """`{origin worker: {aid: handled through}}`: sent within `ACK_INTERVAL`."""
        for origin, positions in acks.items():
            due = self._due.setdefault(origin, {})
            for aid, through in positions.items():
                due[aid] = max(through, due.get(aid, 0))
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(0.0, self._last + ACK_INTERVAL - loop.time()), self.flush)

    def flush(self) -> None:
        """Send what is due now (or, between sessions, once the next one is ready)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._ready():
            return
        self._last = asyncio.get_running_loop().time()
        due, self._due = self._due, {}
        for origin, positions in due.items():
            body = {"worker": self._worker, "acks": positions}
            self._send(control_event(ACK_PREFIX + origin, body, sender=WORKER_AGENT_PREFIX + self._worker))
