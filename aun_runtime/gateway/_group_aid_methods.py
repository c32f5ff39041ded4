"""Group AIDs: a group's own identity, certified by the gateway's CA for a key its owner holds.

`client.create_group(..., aid_store=...)` creates the group and then binds its AID
(`group.bind_group_aid`): the owner's client makes a key pair, sends the public key, and keeps
the private key in its AID store next to the certificate answered here. The certificate is the
same kind as an agent's (CN = the group id, under the development root), so the client's own
chain checks accept it and anyone can fetch it from `/pki/cert/<group id>`.

Binding is done once, by the owner; binding again with the same key answers the same certificate
(a retried call). A `group.create` that carries `public_key` (a named group) binds at once.
`group.renew_group_aid` replaces the key, authorised by the current key's signature; the old
certificate stays on record (what it signed still verifies) but is no longer current.
`group.create` is served here (it calls `_group_methods.create` for the group itself); the
method tables are merged with no name defined twice (`merge_method_tables`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._group_aid_cards import entity_headers, record_binding
from ._group_methods import create as create_group
from ._group_methods import find_group, group_wire, normalize_group_id, require_member
from ._group_store import Group
from ._identities import CertRecord

__all__ = ["GROUP_AID_METHODS", "RENEW_WINDOW_SECONDS", "aid_answer", "key_der", "spki_param"]

_CURVES = ("P-256", "secp256r1", "prime256v1")
#: How far a renewal proof's ``issued_ms`` may be from server time.
RENEW_WINDOW_SECONDS = 300


def spki_param(call: Call, field: str = "public_key") -> bytes:
    """The P-256 public key of `field` (base64 SubjectPublicKeyInfo DER), re-encoded."""
    if call.params.text("curve", default="P-256", max_length=32) not in _CURVES:
        raise RPCError.bad_param("curve", "only the P-256 curve is supported")
    try:
        key = serialization.load_der_public_key(base64.b64decode(call.params.text(field, max_length=4096),
                                                                 validate=True))
    except (binascii.Error, ValueError):
        raise RPCError.bad_param(field, f"'{field}' must be a base64 SubjectPublicKeyInfo (DER)") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise RPCError.bad_param(field, f"'{field}' must be an ECDSA P-256 key")
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_der(record: CertRecord) -> bytes:
    """The DER SubjectPublicKeyInfo of `record`'s key."""
    return record.public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def aid_answer(call: Call, group: Group, record: CertRecord) -> dict[str, Any]:
    """The group and its AID certificate, as the client reads them after a bind, renewal or transfer."""
    group_id = group.group_id
    return {"group": group_wire(call, group), "group_id": group_id, "group_aid": group_id,
            "aid_cert": {"aid": group_id, "cert": record.pem, "cert_pem": record.pem, "serial": record.serial_hex,
                         "cert_fingerprint": "sha256:" + record.cert_sha256}}


async def _bind(call: Call, group: Group, public_der: bytes) -> CertRecord:
    """Certify `public_der` as `group`'s AID (once; the same key again answers the same)."""
    core = call.core
    existing = core.identities.current(group.group_id)
    if existing is not None:
        if not entity_headers(core, group.group_id):  # an agent's AID of the same name
            raise RPCError(ErrorCode.PERMISSION_DENIED, f"{group.group_id} is an agent's AID, not this group's",
                           field="group_id")
        if key_der(existing) != public_der:
            raise RPCError(ErrorCode.PERMISSION_DENIED, f"{group.group_id} is already bound to another key: "
                           "renew it with group.renew_group_aid", field="public_key")
        return existing  # a retried bind
    cert = core.pki.issue_agent_certificate(group.group_id, public_der)
    record = core.identities.register(group.group_id, cert, cert.public_bytes(serialization.Encoding.PEM).decode())
    record_binding(core, group.group_id, record)
    await core.db.commit()
    core.events.emit("group.aid.bound", group_id=group.group_id, owner=call.aid)
    return record


async def bind_group_aid(call: Call) -> dict[str, Any]:
    group = find_group(call)
    if require_member(call, group).role != "owner":
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"only the owner of {group.group_id} binds its AID")
    return aid_answer(call, group, await _bind(call, group, spki_param(call)))


async def create_with_aid(call: Call) -> dict[str, Any]:
    """`group.create`, binding the group's AID at once when the request carries its public key
    (what `create_group` sends for a named group)."""
    public_der = spki_param(call) if "public_key" in call.params.raw else None
    raw = call.params.raw.get("group_id", call.params.raw.get("group_aid", call.params.raw.get("group_name")))
    if isinstance(raw, str) and call.core.identities.is_registered(normalize_group_id(raw, call.core.issuer)):
        raise RPCError.bad_param("group_id", f"{raw!r} is an AID registered on this gateway: a group needs a name "
                                 "of its own", reason="aid_exists")
    created = await create_group(call)
    if public_der is None:
        return created
    group = call.core.groups.get(str(created["group"]["group_id"]))
    assert group is not None
    record = await _bind(call, group, public_der)
    return {**created, **aid_answer(call, group, record)}


def _b64_text(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


async def renew_group_aid(call: Call) -> dict[str, Any]:
    """Replace a bound group AID's key. The proof is the old key's signature over
    `aun-group-aid-renew-v1|group_id|group_aid|sha256(old key b64)|sha256(new key b64)|nonce|issued_ms`
    (what the client signs), made within `RENEW_WINDOW_SECONDS` of now."""
    core, params = call.core, call.params
    group = find_group(call)
    if require_member(call, group).role != "owner":
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"only the owner of {group.group_id} renews its AID")
    current = core.identities.current(group.group_id)
    if current is None or not entity_headers(core, group.group_id):
        raise RPCError(ErrorCode.GROUP_STATE_INVALID, f"{group.group_id} has no bound AID: bind it first")
    old_b64 = params.text("old_public_key", max_length=4096)
    new_b64 = params.text("new_public_key", max_length=4096)
    new_der = spki_param(call, "new_public_key")
    if spki_param(call, "old_public_key") != key_der(current):
        raise RPCError(ErrorCode.PERMISSION_DENIED, "'old_public_key' is not the group AID's current key",
                       field="old_public_key")
    proof = params.mapping("renew_proof")
    nonce, issued, signature = proof.get("nonce"), proof.get("issued_ms"), proof.get("signature")
    if not (isinstance(nonce, str) and 0 < len(nonce) <= 128 and isinstance(issued, int)
            and not isinstance(issued, bool) and isinstance(signature, str) and len(signature) <= 512):
        raise RPCError.bad_param("renew_proof", "'renew_proof' must be {nonce, issued_ms, signature}")
    if abs(time.time() * 1000 - issued) > RENEW_WINDOW_SECONDS * 1000:
        raise RPCError.bad_param("renew_proof.issued_ms", f"the proof is more than {RENEW_WINDOW_SECONDS} s "
                                 "from server time: check the clock")
    group_aid = params.text("group_aid", default=group.group_id, max_length=253).lower()
    signed = "|".join(["aun-group-aid-renew-v1", group.group_id, group_aid, _b64_text(old_b64), _b64_text(new_b64),
                       nonce, str(issued)])
    try:
        if group_aid != group.group_id:
            raise InvalidSignature
        current.public_key.verify(base64.b64decode(signature, validate=True), signed.encode(),
                                  ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, binascii.Error, ValueError):
        raise RPCError(ErrorCode.SIGNATURE_INVALID, "'renew_proof' is not the current group key's signature",
                       field="renew_proof.signature") from None
    cert = core.pki.issue_agent_certificate(group.group_id, new_der)
    record = core.identities.register(group.group_id, cert, cert.public_bytes(serialization.Encoding.PEM).decode(),
                                      rotate=True)
    record_binding(core, group.group_id, record)
    await core.db.commit()
    core.events.emit("group.aid.renewed", group_id=group.group_id, owner=call.aid)
    return aid_answer(call, group, record)


async def get_info(call: Call) -> dict[str, Any]:
    group = find_group(call)
    member = require_member(call, group)
    return {"group": group_wire(call, group), "group_id": group.group_id, "group_aid": group.group_id,
            "member": member.to_wire(), "aid_bound": bool(entity_headers(call.core, group.group_id))}


GROUP_AID_METHODS: dict[str, Method] = {
    "group.create": Method(create_with_aid),
    "group.bind_group_aid": Method(bind_group_aid),
    "group.renew_group_aid": Method(renew_group_aid),
    "group.get_info": Method(get_info),
}
