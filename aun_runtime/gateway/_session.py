"""One WebSocket connection: its challenge, its authenticated identity, its rate budget and its writer.

All frames to a connection (answers and pushes) go through one bounded queue drained by one writer
task, so frames are never interleaved and a slow reader cannot make the server buffer without
bound (see :attr:`GatewayLimits.outbound_frames` for the overflow policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSCloseCode, web

__all__ = ["RateBudget", "Session"]

log = logging.getLogger("aun_runtime.gateway")

#: Close code for a connection that fell too far behind its pushes ("try again later").
CLOSE_SLOW_CONSUMER = 1013
#: Seconds a close handshake may take before the TCP connection is dropped instead.
CLOSE_GRACE_SECONDS = 1.0


class RateBudget:
    """A token bucket: ``burst`` requests at once, ``rate`` per second sustained."""

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._last = time.monotonic()

    def take(self) -> float:
        """Spend one request. Returns 0 if allowed, else the seconds until one is available."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate


@dataclass(eq=False)
class Session:
    """The state of one socket. ``aid`` is set by a successful ``auth.connect`` and never changes."""

    ws: web.WebSocketResponse
    budget: RateBudget
    outbound_frames: int
    challenge_ttl: float
    requests_in_flight: int = 64
    transport: asyncio.Transport | None = None
    id: str = field(default_factory=lambda: "conn-" + secrets.token_hex(8))
    challenge_nonce: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    aid: str | None = None
    device_id: str = ""
    slot_id: str = "default"
    kind: str = "long"
    connected_at: float = 0.0
    #: Run once, after the answer to the first request that follows ``auth.connect``.
    on_next_request: Callable[[], None] | None = None
    _created: float = field(default_factory=time.monotonic)
    _queue: asyncio.Queue[str | None] = field(init=False)
    _writer: asyncio.Task[None] | None = field(default=None, init=False)
    _closer: asyncio.Task[bool] | None = field(default=None, init=False)
    _handlers: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _slots: asyncio.Semaphore = field(init=False)
    _finished: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._queue = asyncio.Queue(maxsize=self.outbound_frames)
        self._slots = asyncio.Semaphore(self.requests_in_flight)

    async def run_handler(self, handler: Coroutine[Any, Any, None]) -> None:
        """Start handling one request, waiting while ``requests_in_flight`` are already running.

        Tasks start in arrival order and each runs until its first await (its commit) before the
        next starts, so requests of one connection take effect in the order they were sent.
        """
        await self._slots.acquire()
        task = asyncio.get_running_loop().create_task(handler)
        self._handlers.add(task)
        task.add_done_callback(self._handler_done)

    def _handler_done(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        self._slots.release()

    @property
    def authenticated(self) -> bool:
        return self.aid is not None

    @property
    def closing(self) -> bool:
        """True once this connection has been told to close (it may take a moment to go)."""
        return self._closer is not None or self.ws.closed

    @property
    def challenge_expired(self) -> bool:
        return time.monotonic() - self._created > self.challenge_ttl

    def start_writer(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name=f"gateway-writer-{self.id}")

    async def _write_loop(self) -> None:
        ws = self.ws
        while True:
            frame = await self._queue.get()
            if frame is None or ws.closed:
                return
            try:
                await ws.send_str(frame)
            except (ConnectionError, RuntimeError):  # the peer went away; the reader notices too
                return

    async def reply(self, frame: str) -> None:
        """Queue an answer, waiting for room: a client that stops reading stops being served."""
        if not self._finished:
            await self._queue.put(frame)

    def push(self, frame: str) -> bool:
        """Queue a push without waiting. A connection whose queue is full is closed as too slow
        (its messages are stored; it pulls them when it reconnects). Returns False then."""
        if self.ws.closed:
            return False
        try:
            self._queue.put_nowait(frame)
            return True
        except asyncio.QueueFull:
            log.warning("closing %s (%s): %d frames behind", self.id, self.aid, self.outbound_frames)
            self.close_soon(CLOSE_SLOW_CONSUMER, b"too slow: reconnect and pull")
            return False

    def close_soon(self, code: int, message: bytes) -> None:
        """Start closing the socket from synchronous code (a timer, a push)."""
        if self._closer is None and not self.ws.closed:
            self._closer = asyncio.get_running_loop().create_task(self._close_or_abort(code, message))

    async def _close_or_abort(self, code: int, message: bytes) -> bool:
        # A peer that stopped reading cannot take a close frame either: give the handshake a moment,
        # then drop the TCP connection (the client sees a network drop and reconnects at once).
        try:
            return await asyncio.wait_for(self.ws.close(code=code, message=message), CLOSE_GRACE_SECONDS)
        except TimeoutError:
            if self.transport is not None:
                self.transport.abort()
            return False

    async def close(self, code: int = WSCloseCode.GOING_AWAY, message: bytes = b"") -> None:
        await self.ws.close(code=code, message=message)

    async def finish(self) -> None:
        """Stop the writer: the reader has ended, so the peer has gone or is going, and anything
        still queued for it is either stored (messages, which it pulls on reconnect) or moot."""
        self._finished = True
        if self._handlers:  # let requests already taken finish: a stored message still gets pushed
            await asyncio.wait(list(self._handlers), timeout=5.0)
        if self._writer is None:
            return
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer
