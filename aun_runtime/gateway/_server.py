"""`GatewayServer`: a local AUN gateway on one host:port, WebSocket JSON-RPC 2.0 plus HTTP.

Why aiohttp: the AUN client needs a real HTTP surface on the *same* port as the WebSocket
endpoint: `GET` and `HEAD` on `/pki/cert/{aid}` (registration and `exists` probe with
`HEAD`), JSON endpoints, 404s it can tell apart, and `PUT /agent.md` with the card in the body.
`websockets`' HTTP hook can answer a `GET` before the upgrade, but it parses nothing else (a
`HEAD` or `PUT` fails as a bad handshake), so it would need a second HTTP stack beside it.
aiohttp serves both from one router and one event loop, and it is already installed with the
client (fastaun depends on it), so the gateway adds no stack of its own.

Usage:

```text
async with GatewayServer("127.0.0.1", port=0, data_dir=tmp) as server:
    print(server.url)            # ws://127.0.0.1:54321/aun
    print(server.root_ca_path)   # the root a client must trust
```

Each socket gets a `challenge` notification at once; each text frame is one JSON-RPC request.
Requests of one connection start in the order they arrive and may overlap while they wait for their
commit (up to `requests_in_flight`); answers and pushes leave through the connection's bounded
writer queue.

Connections are accepted by the gateway's own listener (`._listener`), not aiohttp's, so every
TCP connection counts against `max_connections` from its accept, one that sends no complete HTTP
request within `handshake_timeout` is closed (aiohttp's keep-alive timer, which also runs from the
accept), and a process out of descriptors backs off instead of spinning.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web

from ..operating._bad_requests import BadRequestLog
from ._agent_md_http import add_agent_md_routes
from ._auth_methods import AUTH_METHODS
from ._errors import ErrorCode, GatewayStartError, RPCError
from ._events import GatewayEvents
from ._frames import Request, error_frame, notification_frame, parse_frame, result_frame
from ._gateway_core import GatewayCore, merge_method_tables
from ._group_aid_methods import GROUP_AID_METHODS
from ._group_directory_methods import GROUP_DIRECTORY_METHODS
from ._group_e2ee_send_methods import GROUP_E2EE_SEND_METHODS
from ._group_e2ee_state_methods import GROUP_E2EE_STATE_METHODS
from ._group_invite_methods import GROUP_INVITE_METHODS
from ._group_member_methods import GROUP_MEMBER_METHODS
from ._group_methods import GROUP_METHODS
from ._group_thought_methods import GROUP_THOUGHT_METHODS
from ._group_transfer_methods import GROUP_TRANSFER_METHODS
from ._http import add_http_routes
from ._limits import GatewayLimits
from ._listener import ConnectionGuard, Listener, bind
from ._message_methods import MESSAGE_METHODS
from ._session import RateBudget, Session
from ._thought_methods import THOUGHT_METHODS

__all__ = ["GatewayServer"]

log = logging.getLogger("aun_runtime.gateway")

#: Close code for a socket that did not complete ``auth.connect`` before its challenge expired.
CLOSE_HANDSHAKE_TIMEOUT = 1008
#: Close code used by :meth:`GatewayServer.disconnect`: "service restart", which clients retry.
CLOSE_SERVICE_RESTART = 1012


#: Every method the gateway serves, merged once at import: a name in two tables is an error here.
METHODS = merge_method_tables(
    AUTH_METHODS, MESSAGE_METHODS, THOUGHT_METHODS, GROUP_METHODS, GROUP_DIRECTORY_METHODS,
    GROUP_E2EE_STATE_METHODS, GROUP_E2EE_SEND_METHODS, GROUP_AID_METHODS, GROUP_THOUGHT_METHODS,
    GROUP_MEMBER_METHODS, GROUP_INVITE_METHODS, GROUP_TRANSFER_METHODS,
)


class GatewayServer:
    """A local AUN gateway. Start it with `async with` or [`start`][aun_runtime.AUNCore.start]/[`stop`][aun_runtime.AUNCore.stop].

    Args:
        host: the address to listen on (`127.0.0.1` keeps it on this machine).
        port: the port; 0 picks a free one (read it back from `port` or [`url`][aun_runtime.gateway.GatewayServer.url]).
        data_dir: where the SQLite file and the development PKI live; created if missing.
        issuer: the domain whose AIDs this gateway issues (`alice.<issuer>`). Fixed by the first
            start of a data directory; default `aun.localhost`.
        limits: bounds and deadlines ([`GatewayLimits`][aun_runtime.gateway.GatewayLimits]).
        compress: negotiate permessage-deflate with clients that offer it. Off by default: on a
            loopback or LAN link it costs more CPU than it saves.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, data_dir: str | Path, issuer: str | None = None,
        limits: GatewayLimits | None = None, compress: bool = False,
    ) -> None:
        self.host = host
        self.data_dir = Path(data_dir)
        self._configured_limits = limits or GatewayLimits()
        #: The bounds in force: the ones given, with ``max_connections`` lowered at start if the
        #: process's descriptor limit requires it.
        self.limits = self._configured_limits
        self.compress = compress
        self._requested_port = port
        self._port: int | None = None
        self._issuer = issuer
        self._core: GatewayCore | None = None
        self._runner: web.AppRunner | None = None
        self._bad_requests = BadRequestLog()
        self._listener: Listener | None = None

    # -- public surface ------------------------------------------------------------------------

    @property
    def core(self) -> GatewayCore:
        if self._core is None:
            raise GatewayStartError("the gateway is not started: use 'async with GatewayServer(...)' or start()")
        return self._core

    @property
    def port(self) -> int:
        if self._port is None:
            raise GatewayStartError("the gateway is not started, so it has no port yet")
        return self._port

    @property
    def url(self) -> str:
        """The WebSocket URL clients connect to (their `gateway_url`)."""
        return f"ws://{self._url_host}:{self.port}/aun"

    @property
    def http_url(self) -> str:
        return f"http://{self._url_host}:{self.port}"

    @property
    def _url_host(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"[{host}]" if ":" in host else host

    @property
    def issuer(self) -> str:
        return self.core.issuer

    @property
    def root_ca_path(self) -> Path:
        """The development root certificate clients must trust."""
        return self.core.pki.root_path

    @property
    def events(self) -> GatewayEvents:
        return self.core.events

    @property
    def open_connections(self) -> int:
        """TCP connections open now (HTTP and WebSocket, authenticated or not): what
        `max_connections` bounds."""
        return self._listener.open_connections if self._listener is not None else 0

    def connected_aids(self) -> list[str]:
        """AIDs with at least one authenticated long connection."""
        return self.core.online_aids()

    async def disconnect(self, aid: str, *, code: int = CLOSE_SERVICE_RESTART) -> int:
        """Close every connection of `aid` (clients reconnect on their own). Returns how many."""
        sessions = self.core.sessions_of(aid)
        await asyncio.gather(*(session.close(code, b"closed by the gateway") for session in sessions))
        return len(sessions)

    def revoke_access_tokens(self, aid: str) -> int:
        """Revoke `aid`'s access tokens; its refresh tokens stay valid. Returns how many."""
        count = self.core.identities.revoke_access_tokens(aid)
        self.core.db.commit_sync()
        return count

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.limits = limits = _within_descriptor_limit(self._configured_limits)
        core = GatewayCore(self.data_dir, self._issuer, limits)
        core.register_methods(METHODS)
        app = web.Application()
        app.router.add_get("/aun", self._websocket)
        add_http_routes(app, core, lambda: self.open_connections)
        add_agent_md_routes(app, core)
        # keepalive_timeout runs from the accept as well as between requests: it is the handshake timeout.
        self._bad_requests = BadRequestLog()  # malformed HTTP: a 400, and a line a minute at most
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0,
                               keepalive_timeout=limits.handshake_timeout, logger=self._bad_requests)
        await runner.setup()
        assert runner.server is not None
        try:
            sockets = bind(self.host, self._requested_port, backlog=128)
        except OSError as exc:
            await runner.cleanup()
            core.close()
            raise GatewayStartError(f"cannot listen on {self.host}:{self._requested_port}: {exc}") from exc
        listener = Listener(sockets, runner.server, max_connections=limits.max_connections,
                            send_timeout=limits.send_timeout, handshake_timeout=limits.handshake_timeout)
        listener.start()
        self._port = int(sockets[0].getsockname()[1])
        self._core, self._runner, self._listener = core, runner, listener
        log.info("AUN gateway for %s listening on %s (data: %s)", core.issuer, self.url, self.data_dir)

    async def stop(self) -> None:
        """Close every connection, stop listening, and close the database (all writes committed)."""
        core, runner, listener = self._core, self._runner, self._listener
        if core is None or runner is None or listener is None:
            return
        listener.close()
        # At once, each bounded by its close grace: a peer that does not read cannot hold the stop.
        await asyncio.gather(*(session.close(CLOSE_SERVICE_RESTART, b"gateway stopping") for session in list(core.all_sessions)))
        await runner.cleanup()
        self._bad_requests.close()
        core.close()
        self._core = self._runner = self._listener = None

    async def __aenter__(self) -> GatewayServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- WebSocket -----------------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        core, limits = self.core, self.limits
        ws = web.WebSocketResponse(max_msg_size=limits.hard_frame_bytes, compress=self.compress, autoping=True,
                                   heartbeat=limits.heartbeat)
        try:
            await ws.prepare(request)
        except ConnectionError as exc:  # the peer reset or closed before the 101 could be written
            log.info("WebSocket upgrade abandoned by %s: %s", request.remote or "a peer already gone", exc)
            return web.Response(status=400, text="upgrade abandoned\n")
        transport = request.transport
        session = Session(ws, RateBudget(limits.rate_per_second, limits.rate_burst), limits.outbound_frames,
                          limits.challenge_ttl, limits.requests_in_flight, transport, limits.outbound_bytes)
        core.all_sessions.add(session)
        deadline = asyncio.get_running_loop().call_later(limits.challenge_ttl, self._expire_handshake, session)
        try:
            # The socket's end, whatever its cause, releases the session, even while its reader is
            # parked waiting for room in the writer queue.
            guard = transport.get_protocol() if transport is not None else None
            if isinstance(guard, ConnectionGuard):
                guard.watch(session.lost, session.stalled)
            elif transport is None or transport.is_closing():
                session.lost()
            session.start_writer()
            session.push(notification_frame("challenge", {
                "nonce": session.challenge_nonce, "server": "aun-runtime-gateway", "issuer": core.issuer,
                "protocol": {"min": "1.0", "max": "1.0"}, "auth_methods": ["kite_token"],
                "server_time": int(time.time() * 1000),
            }))
            async for message in ws:
                if not session.accepting:
                    break
                if message.type == WSMsgType.TEXT:
                    await self._on_frame(session, message.data)
                elif message.type == WSMsgType.BINARY:
                    await session.reply(error_frame(None, RPCError(
                        ErrorCode.INVALID_REQUEST, "send JSON-RPC requests as text frames")))
                else:  # an error, e.g. a frame past hard_frame_bytes (aiohttp closes with 1009)
                    break
        finally:
            deadline.cancel()
            core.detach(session)
            if session.aid is not None:
                core.events.emit("disconnected", aid=session.aid, connection_id=session.id,
                                 code=session.close_code or ws.close_code)
            await session.finish()
        return ws

    @staticmethod
    def _expire_handshake(session: Session) -> None:
        if not session.authenticated and not session.ws.closed:
            session.close_soon(CLOSE_HANDSHAKE_TIMEOUT, b"auth.connect not completed in time")

    async def _on_frame(self, session: Session, text: str) -> None:
        limits = self.limits
        if len(text) * 4 > limits.max_frame_bytes and len(text.encode()) > limits.max_frame_bytes:
            await session.reply(error_frame(None, RPCError(
                ErrorCode.INVALID_REQUEST, f"frame is over {limits.max_frame_bytes} bytes",
                limit=limits.max_frame_bytes)))
            return
        parsed = parse_frame(text)
        if isinstance(parsed, tuple):
            await session.reply(error_frame(*parsed))
            return
        wait = session.budget.take()
        if wait:
            if not parsed.is_notification:
                await session.reply(error_frame(parsed.id, RPCError(
                    ErrorCode.RATE_LIMITED, f"rate limit of {limits.rate_per_second:g} requests/s reached",
                    retryable=True, retry_after_ms=max(1, int(wait * 1000)))))
            return
        await session.run_handler(self._handle(session, parsed))

    async def _handle(self, session: Session, parsed: Request) -> None:
        try:
            result, after_reply = await self.core.handle(session, parsed)
        except RPCError as error:
            log.debug("%s %s -> error %d %s", session.aid or session.id, parsed.method, error.code, error.message)
            if not parsed.is_notification:
                await session.reply(error_frame(parsed.id, error))
            return
        except Exception:
            log.exception("%s failed on %s (%s)", parsed.method, session.id, session.aid)
            if not parsed.is_notification:
                await session.reply(error_frame(parsed.id, RPCError(ErrorCode.INTERNAL_ERROR, "internal error")))
            return
        log.debug("%s %s -> ok", session.aid or session.id, parsed.method)
        if not parsed.is_notification:
            await session.reply(result_frame(parsed.id, result))
        for action in after_reply:
            action()

    def describe(self) -> dict[str, Any]:
        """What a user needs to point an AUN client here."""
        return {
            "gateway_url": self.url, "http_url": self.http_url, "issuer": self.issuer,
            "root_ca_path": str(self.root_ca_path), "data_dir": str(self.data_dir.resolve()),
        }


def _within_descriptor_limit(limits: GatewayLimits) -> GatewayLimits:
    """`limits` with `max_connections` lowered so connections alone cannot exhaust descriptors.

    Lowered rather than refused: the default (10,000) is above the usual soft limit (1,024), and a
    gateway that fits its limit is more use than one that will not start. Refused only when
    `descriptor_reserve` leaves no room for a single connection.
    """
    if sys.platform == "win32":  # no RLIMIT_NOFILE to read
        return limits
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limits
    room = soft - limits.descriptor_reserve
    if room < 1:
        raise GatewayStartError(
            f"this process may open {soft} file descriptors (ulimit -n) and descriptor_reserve keeps "
            f"{limits.descriptor_reserve} free: no room for connections; raise ulimit -n"
        )
    if limits.max_connections <= room:
        return limits
    log.warning(
        "max_connections lowered from %d to %d: this process may open %d file descriptors (ulimit -n) and "
        "%d are kept for everything else (descriptor_reserve); raise ulimit -n to allow more",
        limits.max_connections, room, soft, limits.descriptor_reserve,
    )
    return dataclasses.replace(limits, max_connections=room)
