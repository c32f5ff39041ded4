"""`auth.*` and `meta.*`: registration, two-phase login, token refresh, session start, liveness.

Registration (`auth.create_aid`) certifies a public key for an AID of this gateway's issuer
domain. Login proves possession of that key: `aid_login1` hands out a single-use nonce (and proves
the server with its auth certificate), `aid_login2` checks the AID's signature over
`"{nonce}:{client_time}"` and starts a token family. `auth.connect` binds a socket to the AID
whose access token it presents, once, with the socket's own challenge nonce.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import math
import re
import time
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from protocols.aun import validate_aid
from protocols.errors import InvalidAIDError

from ._delivery_mode import DeliveryMode
from ._errors import ErrorCode, RPCError
from ._frames import notification_frame
from ._gateway_core import Call, Method
from ._session import Session

__all__ = ["AUTH_METHODS", "check_aid"]

log = logging.getLogger("aun_runtime.gateway")

#: The AUN client's rule for the name part of an AID (``name.issuer``).
_AID_NAME = re.compile(r"^[a-z0-9_][a-z0-9_-]{3,63}$")


def check_aid(value: str, field: str, issuer: str | None = None) -> str:
    """Validate an AID param (format, AUN name rule, and optionally the issuer domain)."""
    try:
        aid = validate_aid(value)
    except InvalidAIDError as exc:
        raise RPCError.bad_param(field, str(exc)) from None
    name, _, domain = aid.partition(".")
    if not _AID_NAME.match(name) or name.startswith("guest"):
        raise RPCError.bad_param(
            field, f"AID name {name!r} must be 4-64 of [a-z0-9_-], not starting with '-' or 'guest'"
        )
    if issuer is not None and domain != issuer:
        raise RPCError.bad_param(field, f"this gateway issues AIDs of the form name.{issuer}, not {aid!r}")
    return aid


def _clock_agrees(client_time: str, window: float) -> bool:
    """True if `client_time` is a finite number of unix seconds within `window` of ours."""
    try:
        seconds = float(client_time)
    except ValueError:
        return False
    return math.isfinite(seconds) and abs(time.time() - seconds) <= window


async def create_aid(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    aid = check_aid(params.text("aid", max_length=253), "aid", core.issuer)
    curve = params.text("curve", default="P-256")
    if curve not in ("P-256", "secp256r1", "prime256v1"):
        raise RPCError.bad_param("curve", "only the P-256 curve is supported")
    try:
        public_der = base64.b64decode(params.text("public_key", max_length=4096), validate=True)
        public_key = serialization.load_der_public_key(public_der)
    except (binascii.Error, ValueError):
        raise RPCError.bad_param("public_key", "'public_key' must be a base64 SubjectPublicKeyInfo (DER)") from None
    if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.name != "secp256r1":
        raise RPCError.bad_param("public_key", "'public_key' must be an ECDSA P-256 key")
    spki = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    existing = core.identities.current(aid)
    if existing is not None:
        if existing.public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ) != spki:
            raise RPCError(ErrorCode.PERMISSION_DENIED, f"{aid} is already registered with another key", field="aid")
        record = existing  # the same key registering again (a retry): same certificate
    else:
        cert = core.pki.issue_agent_certificate(aid, spki)
        record = core.identities.register(aid, cert, cert.public_bytes(serialization.Encoding.PEM).decode())
        await core.db.commit()
        core.events.emit("aid.registered", aid=aid)
    return {"aid": aid, "cert": record.pem, "ca_cert": core.pki.chain_pem, "curve": "P-256"}


async def aid_login1(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    aid = check_aid(params.text("aid", max_length=253), "aid")
    record = core.identities.current(aid)
    if record is None:
        raise RPCError(ErrorCode.AUTH_FAILED, f"{aid} is not registered on this gateway: register it first", field="aid")
    try:
        presented = x509.load_pem_x509_certificate(params.text("cert", max_length=16384).encode())
    except ValueError:
        raise RPCError.bad_param("cert", "'cert' must be a PEM certificate") from None
    if presented.fingerprint(hashes.SHA256()).hex() != record.cert_sha256:
        raise RPCError(ErrorCode.NONCE_INVALID, "the certificate is not the one issued to this AID", field="cert")
    client_nonce = params.text("client_nonce", max_length=256)
    login = core.logins.begin(aid)
    return {
        "request_id": login.request_id, "nonce": login.nonce, "server_time": time.time(),
        "client_nonce_signature": core.pki.sign_with_auth_key(client_nonce.encode()),
        "auth_cert": core.pki.auth_cert_pem, "auth_curve": "P-256",
    }


async def aid_login2(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    aid = check_aid(params.text("aid", max_length=253), "aid")
    request_id = params.text("request_id", max_length=64)
    nonce = params.text("nonce", max_length=256)
    client_time = params.text("client_time", max_length=64)
    signature = params.text("signature", max_length=1024)
    login = core.logins.take(request_id)
    if login is None or login.aid != aid or not hmac.compare_digest(login.nonce, nonce):
        raise RPCError(ErrorCode.NONCE_INVALID, "login nonce unknown, used or expired: start again with aid_login1")
    if not _clock_agrees(client_time, core.limits.signature_window):
        # "nan" compares as within any window, so anything but a finite number is a bad clock too.
        log.info("login of %s refused: client_time %r is not within %g s of server time", aid, client_time[:64],
                 core.limits.signature_window)
        raise RPCError.bad_param(
            "client_time", f"'client_time' must be unix seconds within {core.limits.signature_window:g} s of "
            "server time: check the clock",
        )
    record = core.identities.current(aid)
    assert record is not None  # aid_login1 checked it, and AIDs are never deleted
    try:
        record.public_key.verify(
            base64.b64decode(signature, validate=True), f"{nonce}:{client_time}".encode(), ec.ECDSA(hashes.SHA256())
        )
    except (binascii.Error, ValueError, InvalidSignature):
        raise RPCError(ErrorCode.SIGNATURE_INVALID, "login signature does not verify with the AID's key") from None
    tokens = core.identities.login(aid)
    await core.db.commit()
    core.events.emit("auth.login", aid=aid)
    return {
        "status": "ok", "aid": aid, "access_token": tokens.access_token, "refresh_token": tokens.refresh_token,
        "expires_in": tokens.expires_in,
    }


async def refresh_token(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    outcome = core.identities.refresh(params.text("refresh_token", max_length=256))
    claimed = params.raw.get("aid")
    if outcome.tokens is not None and claimed is not None and claimed != outcome.aid:
        core.identities.revoke_access_tokens(str(outcome.aid))  # a refresh token presented for someone else
        outcome = type(outcome)(outcome.aid, None, "refresh_token_aid_mismatch")
    await core.db.commit()
    if outcome.tokens is None:
        core.events.emit("token.refresh_refused", aid=outcome.aid, reason=outcome.error)
        return {"success": False, "error": outcome.error, "relogin_required": True}
    core.events.emit("token.refreshed", aid=outcome.aid)
    return {
        "success": True, "aid": outcome.aid, "access_token": outcome.tokens.access_token,
        "refresh_token": outcome.tokens.refresh_token, "expires_in": outcome.tokens.expires_in,
    }


async def connect(call: Call) -> dict[str, Any]:
    core, params, session = call.core, call.params, call.session
    if session.authenticated:
        raise RPCError(ErrorCode.INVALID_REQUEST, f"this connection is already authenticated as {session.aid}")
    nonce = params.text("nonce", max_length=256)
    if session.challenge_expired or not hmac.compare_digest(nonce, session.challenge_nonce):
        raise RPCError(ErrorCode.CONNECT_NONCE_INVALID, "challenge nonce is not this connection's or has expired: reconnect")
    auth = params.mapping("auth")
    token = auth.get("token")
    if not isinstance(token, str) or not token:
        raise RPCError.bad_param("auth.token", "'auth.token' must be the access token from login or refresh")
    device = params.mapping("device")
    device_id = device.get("id")
    if not isinstance(device_id, str) or not device_id.strip() or len(device_id) > 128:
        raise RPCError.bad_param("device.id", "'device.id' must be a non-empty string of at most 128 characters")
    client = params.mapping("client", default={})
    slot_id = client.get("slot_id") or "default"
    if not isinstance(slot_id, str) or len(slot_id) > 128:
        raise RPCError.bad_param("client.slot_id", "'client.slot_id' must be a string of at most 128 characters")
    options = params.mapping("options", default={})
    mode = DeliveryMode.from_params(params.raw.get("delivery_mode"))
    kind = "short" if options.get("kind") == "short" else "long"
    aid, family_or_reason = core.identities.access_token_owner(token)
    if aid is None:
        raise RPCError(ErrorCode.CONNECT_TOKEN_INVALID, family_or_reason)
    # Refused if another delivery_mode is in force for the AID, or its queue slot is taken.
    core.queue.check(aid, mode, device_id.strip(), slot_id, long=kind == "long")
    core.admit(session, aid)  # refused past max_connections_per_aid
    session.aid, session.device_id, session.slot_id = aid, device_id.strip(), slot_id
    core.authenticated(session, family_or_reason)  # closed if that family is revoked later
    session.kind, session.delivery_mode = kind, mode
    session.connected_at = time.time()
    if session.kind == "long":
        core.attach(session)
    if core.queue.connected(session):  # a queue member took over messages of members not online
        await core.db.commit()
    core.events.emit("connected", aid=aid, device_id=session.device_id, connection_id=session.id)
    # The unread hints go out after the connection's next request, not with this answer: fastaun
    # 0.5.25 sets up its end-to-end session after auth.connect returns, and a hint that arrives before
    # that reaches its application as an empty group message.
    session.on_next_request = lambda: hint_unread_groups(call)
    return {
        "status": "ok", "protocol": "1.0", "server_time": int(time.time() * 1000), "authenticated": True,
        "identity": {"aid": aid, "role": "agent", "module_id": "aun-runtime-gateway"},
        "connection": {"id": session.id, "device_id": session.device_id, "slot_id": slot_id, "kind": session.kind,
                       "delivery_mode": mode.to_wire()},
        "capabilities": {"p2p_peer_pull_v1": True, "inline_realtime_payload_v1": True},
    }


def hint_unread_groups(call: Call) -> None:
    """Tell a fresh connection which groups have messages it has not acknowledged, so it pulls them."""
    core, session = call.core, call.session
    for group, member in core.groups.groups_of(call.aid):
        ack, _ = core.groups.cursor(group.group_id, call.aid, session.device_id, session.slot_id)
        if group.message_seq > max(ack, member.join_seq):
            session.push(_hint_frame(group.group_id, group.message_seq, session))


def _hint_frame(group_id: str, seq: int, session: Session) -> str:
    return notification_frame("event/group.message_created", {
        "group_id": group_id, "group_aid": group_id, "seq": seq, "kind": "group.online_unread_hint",
        "target_device_id": session.device_id, "target_slot_id": session.slot_id,
    })


async def ping(call: Call) -> dict[str, Any]:
    return {"pong": True, "timestamp": int(time.time() * 1000)}


async def status(call: Call) -> dict[str, Any]:
    session = call.session
    answer: dict[str, Any] = {
        "mode": "gateway", "aid": session.aid, "role": "agent", "connected_at": int(session.connected_at * 1000),
        "protocol_version": "1.0", "connection_id": session.id, "device_id": session.device_id,
        "slot_id": session.slot_id, "issuer": call.core.issuer,
    }
    # Extension fields (clients tolerate them): what the AID's published agent.md declares. "mode"
    # stays the connection's topology; the behaviour mode is the agent's (AUN doc 13, receiver duties).
    card = call.core.cards.get(call.aid)
    if card is not None:
        answer["agent_md_etag"] = card.etag
        if card.behavior_mode is not None:
            answer["behavior_mode"] = card.behavior_mode
    return answer


AUTH_METHODS: dict[str, Method] = {
    "auth.create_aid": Method(create_aid, pre_auth=True),
    "auth.aid_login1": Method(aid_login1, pre_auth=True),
    "auth.aid_login2": Method(aid_login2, pre_auth=True),
    "auth.refresh_token": Method(refresh_token, pre_auth=True),
    "auth.connect": Method(connect, pre_auth=True),
    "meta.ping": Method(ping),
    "meta.status": Method(status),
}
