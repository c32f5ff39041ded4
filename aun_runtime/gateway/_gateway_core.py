"""The gateway's state and request dispatch, independent of the HTTP/WebSocket transport.

`GatewayCore` owns the database, the PKI, the stores and the live connections, and turns one
parsed request on one connection into a result or an [`RPCError`][aun_runtime.gateway.RPCError]. Handlers live in the
`_*_methods` modules; each declares whether it may run before `auth.connect`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base._strict_json import find_unsafe
from ._agent_cards import CardStore
from ._database import Database
from ._errors import ErrorCode, GatewayStartError, RPCError
from ._events import GatewayEvents
from ._frames import Params, Request, notification_frame
from ._group_store import GroupStore
from ._identities import IdentityStore
from ._inboxes import InboxStore
from ._limits import GatewayLimits
from ._logins import PendingLogins
from ._pki import DevelopmentPKI
from ._queue import QueueRouter
from ._session import Session
from ._signature import verify_client_signature
from ._thoughts import ThoughtStore

__all__ = ["Call", "GatewayCore", "Method", "merge_method_tables"]

log = logging.getLogger("aun_runtime.gateway")

DEFAULT_ISSUER = "aun.localhost"
#: Close code for a connection whose token family was revoked (a refresh token was used twice).
#: Not one of the codes after which the AUN client stops (4001 would be): it reconnects, finds its
#: tokens refused and logs in again, which only the holder of the AID's key can. A thief holding
#: only tokens stays out.
CLOSE_TOKEN_REVOKED = 4005


@dataclass(eq=False)
class Call:
    """One request being handled: the connection, the method, its params and what to do after the answer."""

    core: GatewayCore
    session: Session
    method: str
    params: Params
    after_reply: list[Callable[[], None]] = field(default_factory=list)

    @property
    def aid(self) -> str:
        """The connection's authenticated AID (only called by handlers that require one)."""
        assert self.session.aid is not None
        return self.session.aid

    def own_device(self) -> tuple[str, str]:
        """The (device_id, slot_id) whose cursors this call may touch: the connection's own.

        A `device_id`/`slot_id` param naming another device is refused: a connection moves
        only its own cursors.
        """
        for name, own in (("device_id", self.session.device_id), ("slot_id", self.session.slot_id)):
            value = self.params.raw.get(name)
            if value is not None and value != own:
                raise RPCError(
                    ErrorCode.PERMISSION_DENIED, f"'{name}' {value!r} is not this connection's ({own!r})", field=name
                )
        for name in ("aid", "receiver_aid", "owner_aid"):
            value = self.params.raw.get(name)
            if value is not None and value != self.aid:
                raise RPCError(ErrorCode.PERMISSION_DENIED, f"'{name}' must be this connection's AID", field=name)
        return self.session.device_id, self.session.slot_id


Handler = Callable[[Call], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Method:
    handler: Handler
    pre_auth: bool = False


def merge_method_tables(*tables: Mapping[str, Method]) -> dict[str, Method]:
    """One table of every method in `tables` (the `_*_methods` modules' tables).

    Raises:
        ValueError: a method name is in two tables: one would silently serve in place of the other.
    """
    merged: dict[str, Method] = {}
    for table in tables:
        for name, method in table.items():
            if name in merged and merged[name] is not method:
                raise ValueError(f"the gateway method {name} is defined twice: give each method one table")
            merged[name] = method
    return merged


class GatewayCore:
    """State shared by every connection of one gateway."""

    def __init__(self, data_dir: Path, issuer: str | None, limits: GatewayLimits) -> None:
        self.limits = limits
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self.db = Database(data_dir / "gateway.sqlite3")
        except OSError as exc:
            raise GatewayStartError(f"cannot use data directory {data_dir}: {exc}", value=str(data_dir)) from exc
        stored = self.db.meta("issuer_domain")
        if stored and issuer and stored != issuer:
            self.db.close()
            raise GatewayStartError(
                f"{data_dir} belongs to issuer {stored!r}, not {issuer!r}: use another --data directory"
            )
        self.issuer = stored or issuer or DEFAULT_ISSUER
        if not stored:
            self.db.set_meta("issuer_domain", self.issuer)
            self.db.commit_sync()
        self.pki = DevelopmentPKI(data_dir / "pki", self.issuer)
        self.identities = IdentityStore(
            self.db, access_ttl=limits.access_token_ttl, refresh_ttl=limits.refresh_token_ttl,
            max_refreshes=limits.max_refreshes,
        )
        self.inboxes = InboxStore(self.db)
        self.groups = GroupStore(self.db)
        self.cards = CardStore(self.db)
        self.thoughts = ThoughtStore()  # in memory only: a restart forgets every thought
        self.events = GatewayEvents()
        self.queue = QueueRouter(self.db, self.inboxes, self.events, limits.queue_affinity_senders,
                                 limits.queue_rejoin_grace)
        self.logins = PendingLogins(limits.pending_logins, limits.login_nonce_ttl)
        self.methods: dict[str, Method] = {}
        self.all_sessions: set[Session] = set()
        self._online: dict[str, set[Session]] = {}
        # Every authenticated connection (long and short) by AID: what max_connections_per_aid bounds.
        self._connections_of: dict[str, set[Session]] = {}
        # The token family each authenticated connection presented a token of, and the reverse.
        self._family_of: dict[Session, str] = {}
        self._families: dict[str, set[Session]] = {}
        self.identities.on_family_revoked.append(self._close_family)

    def register_methods(self, methods: Mapping[str, Method]) -> None:
        """Serve `methods` (one merged table, see `merge_method_tables`)."""
        self.methods = merge_method_tables(self.methods, methods)

    # -- connections ---------------------------------------------------------------------------

    def admit(self, session: Session, aid: str) -> None:
        """Count `session` as one of `aid`'s connections, called by `auth.connect` before the
        session takes the AID. Past `max_connections_per_aid` it is refused (4012, retryable): one
        send is pushed to each long connection, so the bound is also a bound on one send's copies."""
        sessions = self._connections_of.setdefault(aid, set())
        limit = self.limits.max_connections_per_aid
        if len(sessions) >= limit:
            log.info("auth.connect of %s on %s refused: it already holds %d connections (max_connections_per_aid)",
                     aid, session.id, len(sessions))
            raise RPCError(
                ErrorCode.CONNECTION_LIMIT,
                f"{aid} already holds {len(sessions)} connections, the most one AID may: close one, or retry later",
                limit=limit, retryable=True,
            )
        sessions.add(session)

    def attach(self, session: Session) -> None:
        """Route pushes for `session.aid` to this (authenticated, long) connection too."""
        assert session.aid is not None
        self._online.setdefault(session.aid, set()).add(session)

    def authenticated(self, session: Session, family: str) -> None:
        """Remember that `session` was authenticated with a token of `family`."""
        self._family_of[session] = family
        self._families.setdefault(family, set()).add(session)

    def _close_family(self, family: str, aid: str) -> None:
        """Close every connection authenticated with a token of a family just revoked. The token
        was checked once, at `auth.connect`: without this, a thief already connected stays so."""
        sessions = self._families.pop(family, set())
        for session in sessions:
            self._family_of.pop(session, None)
            self._withdraw(session)
            session.close_soon(CLOSE_TOKEN_REVOKED, b"token revoked: a refresh token was used twice; log in again")
        if sessions:
            log.warning("closing %d connection(s) of %s with %d: their token family was revoked (a refresh "
                        "token was used twice)", len(sessions), aid, CLOSE_TOKEN_REVOKED)

    def detach(self, session: Session) -> None:
        self.all_sessions.discard(session)
        self.queue.detached(session)  # a queue member's unacknowledged messages go to the others
        family = self._family_of.pop(session, None)
        if family is not None:
            _discard(self._families, family, session)
        if session.aid is not None:
            _discard(self._connections_of, session.aid, session)
            _discard(self._online, session.aid, session)

    def sessions_of(self, aid: str) -> list[Session]:
        return list(self._online.get(aid, ()))

    def online_aids(self) -> list[str]:
        return sorted(self._online)

    def push(self, aid: str, event: str, build: Callable[[Session], dict[str, Any]]) -> int:
        """Push `event/<event>` to every long connection of `aid`; returns how many got it."""
        delivered = 0
        for session in self.sessions_of(aid):
            if session.push(notification_frame(f"event/{event}", build(session))):
                delivered += 1
            elif session.closing:
                self._withdraw(session)
        return delivered

    def _withdraw(self, session: Session) -> None:
        """Route nothing more to a connection being closed (it is detached once its socket ends).
        A slow consumer's socket may take a second to give up; meanwhile it is no longer online."""
        if session.aid is not None:
            _discard(self._online, session.aid, session)

    # -- dispatch ------------------------------------------------------------------------------

    async def handle(self, session: Session, request: Request) -> tuple[dict[str, Any], list[Callable[[], None]]]:
        """Run one request. Returns the result and the actions to take once it has been answered."""
        method = self.methods.get(request.method)
        if method is None:
            raise RPCError(ErrorCode.METHOD_NOT_FOUND, f"unknown method {request.method!r}")
        if not method.pre_auth and not session.authenticated:
            raise RPCError(ErrorCode.NOT_CONNECTED, f"{request.method} requires auth.connect first")
        unsafe = find_unsafe(request.params)
        if unsafe is not None:
            # What is accepted is relayed as it is: a value the client cannot parse would make it
            # drop its connection at every delivery attempt. Refused here, before it is stored.
            field_path, problem = unsafe
            log.info("%s: %s refused, '%s' %s", session.aid or session.id, request.method, field_path, problem)
            raise RPCError.bad_param(field_path, f"'{field_path}' {problem}", reason="unreadable_value")
        if session.authenticated and "client_signature" in request.params:
            cert = self.identities.current(self.aid_of(session))
            if cert is None:
                raise RPCError(ErrorCode.AUTH_FAILED, "this connection's AID is no longer registered")
            verify_client_signature(
                request.method, request.params, connection_aid=self.aid_of(session), cert=cert,
                window=self.limits.signature_window,
            )
        call = Call(self, session, request.method, Params(request.params))
        follow_up = session.on_next_request
        if follow_up is not None and request.method != "auth.connect":
            session.on_next_request = None
            call.after_reply.append(follow_up)
        try:
            result = await method.handler(call)
        except BaseException:
            if follow_up is not None and session.on_next_request is None:
                session.on_next_request = follow_up  # still owed: after the next request that succeeds
            raise
        return result, call.after_reply

    @staticmethod
    def aid_of(session: Session) -> str:
        assert session.aid is not None
        return session.aid

    def close(self) -> None:
        self.queue.close()
        self.db.close()


def _discard(index: dict[str, set[Session]], key: str, session: Session) -> None:
    """Take `session` out of `index[key]`, and the key out of `index` once its set is empty."""
    sessions = index.get(key)
    if sessions is not None:
        sessions.discard(session)
        if not sessions:
            del index[key]
