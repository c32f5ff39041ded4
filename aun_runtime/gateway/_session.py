"""One WebSocket connection: its challenge, its authenticated identity, its rate budget and its writer.

All frames to a connection (answers and pushes) go through one queue drained by one writer task, so
frames are never interleaved. The queue is bounded in frames and in bytes, so a slow reader cannot
make the server buffer without bound (see `GatewayLimits.outbound_frames` and
`outbound_bytes` for the overflow policy), and every wait on it ends when the socket does: the
listener tells the session (`Session.lost`), so a peer that resets while answers wait for
room releases its session at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from ._delivery_mode import FANOUT, DeliveryMode

__all__ = ["RateBudget", "Session"]

log = logging.getLogger("aun_runtime.gateway")

#: Close code for a connection that fell too far behind its pushes ("try again later").
CLOSE_SLOW_CONSUMER = 1013
#: Seconds a close handshake may take before the TCP connection is dropped instead.
CLOSE_GRACE_SECONDS = 1.0


class RateBudget:
    """A token bucket: `burst` requests at once, `rate` per second sustained."""

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
    """The state of one socket. `aid` is set by a successful `auth.connect` and never changes."""

    ws: web.WebSocketResponse
    budget: RateBudget
    outbound_frames: int
    challenge_ttl: float
    requests_in_flight: int = 64
    transport: asyncio.Transport | None = None
    outbound_bytes: int = 8 * 1024 * 1024
    id: str = field(default_factory=lambda: "conn-" + secrets.token_hex(8))
    challenge_nonce: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    aid: str | None = None
    device_id: str = ""
    slot_id: str = "default"
    kind: str = "long"
    #: What ``auth.connect`` declared: fanout (every connection gets every message) or queue.
    delivery_mode: DeliveryMode = FANOUT
    connected_at: float = 0.0
    #: Run once, after the answer to the first request that follows ``auth.connect``.
    on_next_request: Callable[[], None] | None = None
    #: The close code the gateway chose for this connection, if it closed it (1008, 1013...).
    close_code: int | None = None
    _created: float = field(default_factory=time.monotonic)
    #: Encoded frames waiting for the writer, and the bytes of those plus of answers waiting for a slot.
    _frames: deque[bytes] = field(default_factory=deque, init=False)
    _pending_bytes: int = field(default=0, init=False)
    _writer_waiting: asyncio.Future[None] | None = field(default=None, init=False)
    _room_waiters: deque[asyncio.Future[None]] = field(default_factory=deque, init=False)
    _slot_waiter: asyncio.Future[None] | None = field(default=None, init=False)
    _writer: asyncio.Task[None] | None = field(default=None, init=False)
    _closer: asyncio.Task[bool] | None = field(default=None, init=False)
    _handlers: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _lost: bool = field(default=False, init=False)
    _finished: bool = field(default=False, init=False)

    async def run_handler(self, handler: Coroutine[Any, Any, None]) -> None:
        """Start handling one request, waiting while `requests_in_flight` are already running.

        Tasks start in arrival order and each runs until its first await (its commit) before the
        next starts, so requests of one connection take effect in the order they were sent. A
        connection that is closing or gone starts nothing more: its socket's end wakes this wait.
        """
        while len(self._handlers) >= self.requests_in_flight and not self._lost:
            self._slot_waiter = asyncio.get_running_loop().create_future()
            await self._slot_waiter
        if not self.accepting:
            handler.close()
            return
        task = asyncio.get_running_loop().create_task(handler)
        self._handlers.add(task)
        task.add_done_callback(self._handler_done)

    def _handler_done(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        _wake(self._slot_waiter)

    @property
    def authenticated(self) -> bool:
        return self.aid is not None

    @property
    def closing(self) -> bool:
        """True once this connection has been told to close (it may take a moment to go)."""
        return self._closer is not None or self.ws.closed

    @property
    def accepting(self) -> bool:
        """True while frames for this connection are queued: not closing, not gone, not finished."""
        return not (self._lost or self._finished or self._closer is not None or self.ws.closed)

    @property
    def pending_bytes(self) -> int:
        """Bytes of the frames waiting to be written to this connection (see `outbound_bytes`)."""
        return self._pending_bytes

    @property
    def challenge_expired(self) -> bool:
        return time.monotonic() - self._created > self.challenge_ttl

    def start_writer(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name=f"gateway-writer-{self.id}")

    async def _write_loop(self) -> None:
        ws, frames = self.ws, self._frames
        loop = asyncio.get_running_loop()
        try:
            while True:
                while not frames:
                    if not self.accepting:
                        return
                    self._writer_waiting = loop.create_future()
                    await self._writer_waiting
                data = frames.popleft()
                while self._room_waiters:  # a slot is free: wake the answer that has waited longest
                    waiter = self._room_waiters.popleft()
                    if not waiter.done():
                        waiter.set_result(None)
                        break
                await ws.send_frame(data, WSMsgType.TEXT)
                if self.accepting:  # else the counts were reset when the queue was dropped
                    self._pending_bytes -= len(data)
        except (ConnectionError, RuntimeError):  # the peer went away; the reader notices too
            self.lost()

    async def reply(self, frame: str) -> None:
        """Queue an answer, waiting for a slot while `outbound_frames` are queued: a client that
        stops reading stops being served. The wait ends when the socket does. An answer that would
        take the bytes waiting past `outbound_bytes` closes the connection as too slow instead."""
        if not self.accepting:
            return
        data = frame.encode()
        if not self._reserve(len(data)):
            return
        if len(self._frames) >= self.outbound_frames:
            loop = asyncio.get_running_loop()
            try:
                while len(self._frames) >= self.outbound_frames:
                    waiter = loop.create_future()
                    self._room_waiters.append(waiter)
                    await waiter
                    if not self.accepting:
                        return  # dropped with the queue (its bytes too)
            except asyncio.CancelledError:
                if self.accepting:
                    self._pending_bytes -= len(data)
                raise
        self._frames.append(data)
        _wake(self._writer_waiting)

    def push(self, frame: str) -> bool:
        """Queue a push without waiting. A connection with `outbound_frames` queued, or that this
        push would take past `outbound_bytes`, is closed as too slow (its messages are stored; it
        pulls them when it reconnects). Returns False then, and once the connection is closing."""
        if not self.accepting:
            return False
        if len(self._frames) >= self.outbound_frames:
            self._too_slow(f"{len(self._frames)} frames waiting to be sent (outbound_frames)")
            return False
        data = frame.encode()
        if not self._reserve(len(data)):
            return False
        self._frames.append(data)
        _wake(self._writer_waiting)
        return True

    def _reserve(self, size: int) -> bool:
        pending = self._pending_bytes
        if pending and pending + size > self.outbound_bytes:
            self._too_slow(f"{pending + size:,} bytes waiting to be sent, over outbound_bytes ({self.outbound_bytes:,})")
            return False
        self._pending_bytes = pending + size
        return True

    def _too_slow(self, why: str) -> None:
        log.warning("closing %s (%s) as too slow (%d): %s; it pulls what it missed when it reconnects",
                    self.id, self.aid, CLOSE_SLOW_CONSUMER, why)
        self.close_soon(CLOSE_SLOW_CONSUMER, b"too slow: reconnect and pull")

    def stalled(self) -> None:
        """The socket has taken nothing for `send_timeout`: the peer does not read. Close it."""
        if not self.closing:
            log.warning("closing %s (%s) as too slow (%d): nothing could be written to it for send_timeout",
                        self.id, self.aid, CLOSE_SLOW_CONSUMER)
            self.close_soon(CLOSE_SLOW_CONSUMER, b"too slow: reconnect and pull")

    def lost(self) -> None:
        """The socket has ended: release every frame and every wait held for it."""
        self._lost = True
        self._drop()

    def _drop(self) -> None:
        self._frames.clear()
        self._pending_bytes = 0
        _wake(self._writer_waiting)
        while self._room_waiters:
            _wake(self._room_waiters.popleft())
        _wake(self._slot_waiter)

    def close_soon(self, code: int, message: bytes) -> None:
        """Start closing the socket from synchronous code (a timer, a push). Nothing queued for it
        is sent any more: only the close frame."""
        if self._closer is None and not self.ws.closed:
            self.close_code = code
            self._closer = asyncio.get_running_loop().create_task(self._close_or_abort(code, message))
            self._drop()

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
        """Close now, waiting at most `CLOSE_GRACE_SECONDS` (a peer that does not read is dropped)."""
        if self.close_code is None:
            self.close_code = code
        await self._close_or_abort(code, message)

    async def finish(self) -> None:
        """Stop the writer: the reader has ended, so the peer has gone or is going, and anything
        still queued for it is either stored (messages, which it pulls on reconnect) or moot."""
        self._finished = True
        self._drop()
        if self._handlers:  # let requests already taken finish: a stored message still gets pushed
            await asyncio.wait(list(self._handlers), timeout=5.0)
        if self._writer is None:
            return
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
