"""`group.transfer_owner` / `group.complete_transfer`: handing a group, and its AID, to another member.

Two phases, as the client runs them:

1. The owner asks (`transfer_owner`), authorised by the group AID's current key: a signature
   over `aun-group-owner-transfer-v1|group_id|group_aid|new_owner|nonce|issued_ms`. Nothing
   changes hands yet: the transfer is *pending* (one per group; asking again replaces it) and the
   group hears `group.changed` `owner_transfer_rekey_pending`, on which the new owner's client
   completes by itself.
2. The new owner completes (`complete_transfer`) with a *new* key for the group AID and its own
   AID key's signature over `aun-group-owner-transfer-accept-v1|group_id|group_aid|new_owner|
   sha256(new key b64)|nonce|issued_ms`. The gateway certifies the new key (the old certificate
   stays on record but is no longer current, so the old owner's copy of the group key authorises
   nothing more), makes the new owner the owner and the old one an admin, and announces
   `owner_transferred`. Completing again with the same key answers the same (a retried call).

Both proofs are accepted within `RENEW_WINDOW_SECONDS` of server time. A pending transfer
ends if its new owner leaves or is removed, or the group is dissolved.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ._auth_methods import check_aid
from ._database import Database
from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._group_aid_cards import entity_headers, record_binding
from ._group_aid_methods import RENEW_WINDOW_SECONDS, aid_answer, key_der, spki_param
from ._group_methods import announce, find_group, require_member
from ._group_store import Group
from ._identities import CertRecord

__all__ = ["GROUP_TRANSFER_METHODS", "cancel_transfer"]


def _pending(db: Database, group_id: str) -> dict[str, Any] | None:
    row = db.row("SELECT body FROM group_transfers WHERE group_id = ?", (group_id,))
    return None if row is None else dict(json.loads(row[0]))


def cancel_transfer(db: Database, group_id: str, new_owner: str | None = None) -> None:
    """End `group_id`'s pending transfer (only one to `new_owner`, if given)."""
    pending = _pending(db, group_id)
    if pending is not None and (new_owner is None or pending["new_owner"] == new_owner):
        with db.atomic():
            db.execute("DELETE FROM group_transfers WHERE group_id = ?", (group_id,))


def _bound_key(call: Call, group: Group) -> CertRecord:
    record = call.core.identities.current(group.group_id)
    if record is None or not entity_headers(call.core, group.group_id):
        raise RPCError(ErrorCode.GROUP_STATE_INVALID, f"{group.group_id} has no bound AID to transfer: bind it "
                       "first (group.bind_group_aid)", reason="no_group_aid")
    return record


def _verify_proof(call: Call, field: str, key: ec.EllipticCurvePublicKey, parts: list[str]) -> dict[str, Any]:
    """Check the proof object `field` ({nonce, issued_ms, signature}) is `key`'s signature over
    `parts` joined with its nonce and issue time; returns the proof."""
    proof = call.params.mapping(field)
    nonce, issued, signature = proof.get("nonce"), proof.get("issued_ms"), proof.get("signature")
    if not (isinstance(nonce, str) and 0 < len(nonce) <= 128 and isinstance(issued, int)
            and not isinstance(issued, bool) and isinstance(signature, str) and 0 < len(signature) <= 512):
        raise RPCError.bad_param(field, f"'{field}' must be {{nonce, issued_ms, signature}}")
    if abs(time.time() * 1000 - issued) > RENEW_WINDOW_SECONDS * 1000:
        raise RPCError.bad_param(f"{field}.issued_ms", f"the proof is more than {RENEW_WINDOW_SECONDS} s from "
                                 "server time: check the clock")
    signed = "|".join([*parts, nonce, str(issued)]).encode()
    try:
        # The client sends standard base64; the URL-safe alphabet is accepted too.
        raw = base64.b64decode(signature.replace("-", "+").replace("_", "/"), validate=True)
        key.verify(raw, signed, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, binascii.Error, ValueError):
        raise RPCError(ErrorCode.SIGNATURE_INVALID, f"'{field}' does not verify", field=f"{field}.signature") from None
    return {"nonce": nonce, "issued_ms": issued, "signature": signature}


def _group_aid(call: Call, group: Group) -> str:
    group_aid = str(call.params.text("group_aid", default=group.group_id, max_length=253)).strip().lower()
    if group_aid != group.group_id:
        raise RPCError.bad_param("group_aid", f"'group_aid' {group_aid!r} is not {group.group_id}'s")
    return group_aid


async def transfer_owner(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    if require_member(call, group).role != "owner":
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"only the owner of {group.group_id} transfers it")
    field = "new_owner" if "new_owner" in params.raw else "aid"
    new_owner = check_aid(params.text(field, max_length=253), field)
    if new_owner == call.aid:
        raise RPCError.bad_param(field, "the group is already yours")
    if core.groups.member(group.group_id, new_owner) is None:
        raise RPCError(ErrorCode.GROUP_NOT_MEMBER, f"{new_owner} is not a member of {group.group_id}", field=field)
    record = _bound_key(call, group)
    group_aid = _group_aid(call, group)
    auth = _verify_proof(call, "transfer_auth", record.public_key,
                         ["aun-group-owner-transfer-v1", group.group_id, group_aid, new_owner])
    pending = {"status": "pending_rekey", "group_id": group.group_id, "group_aid": group_aid,
               "old_owner": call.aid, "new_owner": new_owner, "old_serial": record.serial_hex,
               "transfer_auth": auth, "created_at": int(time.time() * 1000)}
    with core.db.atomic():
        core.db.execute("INSERT OR REPLACE INTO group_transfers (group_id, body) VALUES (?, ?)",
                        (group.group_id, json.dumps(pending, separators=(",", ":"))))
    announce(call, group, {"action": "owner_transfer_rekey_pending", "status": "pending_rekey",
                           "old_owner": call.aid, "new_owner": new_owner, "actor_aid": call.aid})
    await core.db.commit()
    core.events.emit("group.owner.transfer_pending", group_id=group.group_id, new_owner=new_owner)
    wire = aid_answer(call, group, record)
    return {"status": "pending_rekey", "requires_ca_rekey": True, "complete_rpc": "group.complete_transfer",
            "group": wire["group"], "group_id": group.group_id, "group_aid": group_aid, "old_owner": call.aid,
            "new_owner": new_owner, "pending_owner_transfer": {k: v for k, v in pending.items() if k != "old_serial"}}


async def complete_transfer(call: Call) -> dict[str, Any]:
    core = call.core
    group = find_group(call)
    require_member(call, group)
    new_der = spki_param(call)
    current = _bound_key(call, group)
    pending = _pending(core.db, group.group_id)
    if pending is None:
        if group.owner_aid == call.aid and key_der(current) == new_der:  # a retried completion
            return {"status": "transferred", **aid_answer(call, group, current), "new_owner": call.aid}
        raise RPCError(ErrorCode.GROUP_STATE_INVALID, f"no owner transfer of {group.group_id} is pending",
                       reason="no_pending_transfer")
    if pending["new_owner"] != call.aid:
        raise RPCError(ErrorCode.PERMISSION_DENIED, f"the pending transfer of {group.group_id} is to "
                       f"{pending['new_owner']}, not {call.aid}")
    if key_der(current) == new_der:
        raise RPCError.bad_param("public_key", "a transfer needs a new group key, not the current one")
    group_aid = _group_aid(call, group)
    cert = core.identities.current(call.aid)
    if cert is None:
        raise RPCError(ErrorCode.AUTH_FAILED, f"{call.aid} has no current certificate")
    public_b64 = call.params.text("public_key", max_length=4096)
    _verify_proof(call, "transfer_accept", cert.public_key,
                  ["aun-group-owner-transfer-accept-v1", group.group_id, group_aid, call.aid,
                   hashlib.sha256(public_b64.encode()).hexdigest()])
    old_owner = group.owner_aid
    issued = core.pki.issue_agent_certificate(group.group_id, new_der)
    record = core.identities.register(group.group_id, issued, issued.public_bytes(serialization.Encoding.PEM).decode(),
                                      rotate=True)
    record_binding(core, group.group_id, record)
    core.groups.set_owner(group, call.aid)
    cancel_transfer(core.db, group.group_id)
    announce(call, group, {"action": "owner_transferred", "status": "transferred", "old_owner": old_owner,
                           "new_owner": call.aid, "actor_aid": call.aid})
    await core.db.commit()
    core.events.emit("group.owner.transferred", group_id=group.group_id, old_owner=old_owner, new_owner=call.aid)
    return {"status": "transferred", **aid_answer(call, group, record), "old_owner": old_owner, "new_owner": call.aid}


GROUP_TRANSFER_METHODS: dict[str, Method] = {
    "group.transfer_owner": Method(transfer_owner),
    "group.complete_transfer": Method(complete_transfer),
}
