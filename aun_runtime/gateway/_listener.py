"""The gateway's TCP listener: every connection counted from its accept, and no spinning when the
process runs out of file descriptors.

Why not `loop.create_server`: its protocol factory cannot refuse a connection, so nothing counts
the sockets that never finish an HTTP request, and on Python 3.11 an `accept()` that fails with
EMFILE does not end its accept batch: it goes on calling `accept()`, each failure logging a message
with a traceback and scheduling one more retry, so a process out of descriptors spins at full CPU and
floods its log. This listener accepts by itself (`loop.add_reader` on each listening socket, then
`loop.connect_accepted_socket`), so it can:

- count every TCP connection from its accept (HTTP or WebSocket, before any request) and answer the
  one past `max_connections` with HTTP 503 instead of serving it;
- stop accepting when descriptors run out, retry after a backoff (0.05 s doubling to 1 s), and log
  that once per episode;
- tell a connection's owner when its socket ends, whatever the reason (`ConnectionGuard.watch`),
  and end a connection the server has not been able to write to for `send_timeout`.

Each accepted connection's protocol is aiohttp's own request handler, wrapped in a
`ConnectionGuard` that forwards every callback to it.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

__all__ = ["ConnectionGuard", "Listener", "bind"]

log = logging.getLogger("aun_runtime.gateway")

#: What an accept() error means, for the log: any of them makes the listener back off, not retry at once.
_STARVED_BY = {
    errno.EMFILE: "out of file descriptors", errno.ENFILE: "with the system out of file descriptors",
    errno.ENOBUFS: "out of socket buffers", errno.ENOMEM: "out of memory",
}
#: The first and the longest pause before accepting again once descriptors have run out.
ACCEPT_BACKOFF_FIRST = 0.05
ACCEPT_BACKOFF_MAX = 1.0
#: Connections past ``max_connections`` being answered 503 at once; past this they are just closed.
#: Each holds a descriptor for at most :data:`REFUSAL_LINGER` seconds (``descriptor_reserve`` covers them).
REFUSALS_AT_ONCE = 16
REFUSAL_LINGER = 1.0
#: Seconds a connection gets, after its owner was told it stalled, before it is dropped regardless.
STALL_GRACE = 2.0

_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)


def bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for `host` (every address it resolves to, like `loop.create_server`)."""
    hosts: list[str | None] = [None] if host in ("", None) else [host]
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for name in hosts:
            for family, kind, proto, _, address in socket.getaddrinfo(
                name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            ):
                if (family, address) in seen:
                    continue
                seen.add((family, address))
                sock = socket.socket(family, kind, proto)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(backlog)
                sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class ConnectionGuard(asyncio.Protocol):
    """One accepted TCP connection: forwards to aiohttp's handler, and reports the socket's end and stalls."""

    __slots__ = ("_inner", "_listener", "_on_lost", "_on_stall", "_stall_timer", "counted", "ended", "transport")

    def __init__(self, inner: asyncio.Protocol, listener: Listener) -> None:
        self._inner = inner
        self._listener = listener
        self._on_lost: Callable[[], None] | None = None
        self._on_stall: Callable[[], None] | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self.counted = True
        self.ended = False
        self.transport: asyncio.Transport | None = None

    def watch(self, on_lost: Callable[[], None], on_stall: Callable[[], None]) -> None:
        """Call `on_lost` once the socket has ended (at once if it already has), and `on_stall`
        instead of dropping the connection when the peer has not read for `send_timeout`."""
        if self.ended:
            on_lost()
            return
        self._on_lost, self._on_stall = on_lost, on_stall

    # -- asyncio.Protocol, forwarded ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        # The peer is not reading fast enough to keep the socket's buffers from filling up. It has
        # send_timeout seconds to drain them before the connection is given up.
        self._inner.pause_writing()
        if self._stall_timer is None:
            self._stall_timer = asyncio.get_running_loop().call_later(self._listener.send_timeout, self._stalled)

    def resume_writing(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        self._listener.release(self)
        try:
            self._inner.connection_lost(exc)
        finally:
            on_lost, self._on_lost, self._on_stall = self._on_lost, None, None
            if on_lost is not None:
                on_lost()

    # -- stalls --------------------------------------------------------------------------------

    def _stalled(self) -> None:
        self._stall_timer = None
        transport = self.transport
        if self.ended or transport is None:
            return
        if self._on_stall is not None:
            self._on_stall()  # a WebSocket session: it closes itself (1013), or drops the socket
            asyncio.get_running_loop().call_later(STALL_GRACE, self._abort)
            return
        log.info("dropping the HTTP connection from %s: it has read nothing for %g s (send_timeout)",
                 _peer(transport), self._listener.send_timeout)
        transport.abort()

    def _abort(self) -> None:
        if not self.ended and self.transport is not None:
            self.transport.abort()


class _Refusal(asyncio.Protocol):
    """A connection past `max_connections`: answered 503, its request read and dropped, then closed."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        body = f"connection limit ({self._listener.max_connections}) reached: retry later\n".encode()
        transport.write(_REFUSAL % (len(body), body))
        transport.write_eof()  # the client reads the answer, then closes; its request is read and dropped
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_LINGER, transport.abort)

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._listener.refusals -= 1


class Listener:
    """Accepts on `sockets`, handing each connection to `factory()` (aiohttp's request handler).

    `open_connections` counts the accepted connections not yet closed; past `max_connections` a
    new one is answered 503 (logged once while the gateway stays full, once again when it is back
    under three quarters of the limit).
    """

    def __init__(
        self, sockets: list[socket.socket], factory: Callable[[], asyncio.Protocol], *, max_connections: int,
        send_timeout: float, handshake_timeout: float, backlog: int = 128,
    ) -> None:
        self.sockets = sockets
        self.max_connections = max_connections
        self.send_timeout = send_timeout
        self.handshake_timeout = handshake_timeout
        self.open_connections = 0
        self.refusals = 0
        #: Connections refused since start because ``max_connections`` were open.
        self.refused_total = 0
        self._factory = factory
        self._backlog = backlog
        self._loop = asyncio.get_running_loop()
        self._serving = False
        self._full_since_refused: int | None = None
        self._starved_at: float | None = None
        self._starved_by = ""
        self._backoff = ACCEPT_BACKOFF_FIRST
        self._retry: asyncio.TimerHandle | None = None
        self._pending: set[asyncio.Task[object]] = set()

    def start(self) -> None:
        self._serving = True
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        """Stop accepting and close the listening sockets (open connections are left to aiohttp)."""
        self._serving = False
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()

    # -- accepting -----------------------------------------------------------------------------

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(self._backlog):
            try:
                conn, _address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:  # out of descriptors, or anything else: retrying at once would spin
                self._starve(exc)
                return
            if self._starved_at is not None:
                log.info("accepting connections again, after %.1f s %s (%d open)",
                         self._loop.time() - self._starved_at, self._starved_by, self.open_connections)
                self._starved_at, self._backoff = None, ACCEPT_BACKOFF_FIRST
            conn.setblocking(False)
            if self.open_connections >= self.max_connections:
                self._refuse(conn)
                continue
            self.open_connections += 1
            self._adopt(conn, ConnectionGuard(self._factory(), self))

    def _adopt(self, conn: socket.socket, protocol: asyncio.Protocol) -> None:
        started = False

        def factory() -> asyncio.Protocol:
            nonlocal started
            started = True  # a transport is made next, and it owns the socket from here on
            return protocol

        task: asyncio.Task[object] = self._loop.create_task(self._loop.connect_accepted_socket(factory, conn))
        self._pending.add(task)

        def done(task: asyncio.Task[object]) -> None:
            self._pending.discard(task)
            failed = task.cancelled() or task.exception() is not None
            if failed and not started:  # nothing took the socket: close it and forget the connection
                conn.close()
                if isinstance(protocol, ConnectionGuard):
                    self.release(protocol)
                else:
                    self.refusals -= 1

        task.add_done_callback(done)

    def release(self, guard: ConnectionGuard) -> None:
        """A counted connection has ended (called once per connection)."""
        if not guard.counted:
            return
        guard.counted = False
        self.open_connections -= 1
        if self._full_since_refused is not None and self.open_connections <= self.max_connections * 3 // 4:
            log.info("connections back under the limit: %d open of %d, %d refused while full",
                     self.open_connections, self.max_connections, self.refused_total - self._full_since_refused)
            self._full_since_refused = None

    def _refuse(self, conn: socket.socket) -> None:
        self.refused_total += 1
        if self._full_since_refused is None:
            self._full_since_refused = self.refused_total - 1
            log.warning(
                "connection limit reached: %d TCP connections open (max_connections); new ones are answered "
                "HTTP 503 until some close (one without a complete HTTP request closes after %g s)",
                self.open_connections, self.handshake_timeout,
            )
        if self.refusals >= REFUSALS_AT_ONCE:
            conn.close()
            return
        self.refusals += 1
        self._adopt(conn, _Refusal(self))

    # -- out of descriptors --------------------------------------------------------------------

    def _starve(self, exc: OSError) -> None:
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
        if self._retry is not None:  # another listening socket failed in the same turn: one retry is enough
            return
        if self._starved_at is None:
            self._starved_at = self._loop.time()
            self._backoff = ACCEPT_BACKOFF_FIRST
            self._starved_by = _STARVED_BY.get(exc.errno or 0, f"with accept() failing ({exc.strerror})")
            log.warning(
                "%s (%s): not accepting new connections for now, retrying every %g s at most; %d TCP connections "
                "open (max_connections %d)",
                self._starved_by[0].upper() + self._starved_by[1:], errno.errorcode.get(exc.errno or 0, exc.errno),
                ACCEPT_BACKOFF_MAX, self.open_connections, self.max_connections,
            )
        else:
            self._backoff = min(self._backoff * 2, ACCEPT_BACKOFF_MAX)
        self._retry = self._loop.call_later(self._backoff, self._resume)

    def _resume(self) -> None:
        self._retry = None
        if self._serving:
            for sock in self.sockets:
                self._loop.add_reader(sock.fileno(), self._accept, sock)


def _peer(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
