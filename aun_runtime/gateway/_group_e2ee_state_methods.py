"""`group.v2.*` key and state calls of group end-to-end encryption (V2, per-message keys).

The gateway keeps what lets members encrypt to each other and nothing that decrypts:

* `group.v2.put_group_pk`: a member device publishes its group prekey (an SPK signed by its
  AID key). The gateway checks the `spk_id` and the signature against the AID's certificate, so
  no connection can publish a key in another AID's name.
* `group.v2.bootstrap`: a sender's snapshot before it encrypts: the devices (and their prekeys)
  of every member of the current signed state, the state itself, and which members are still
  pending. Members not yet in a signed state get no key wraps once the group has one; before any
  state is signed, every member is a recipient.
* `group.v2.propose_state` / `confirm_state` / `get_proposal` and `group.get_state`: the
  two-phase signed membership state. A proposal must be the next version over the current hash,
  by the owner (the first) or an admin, signed with the proposer's AID key; confirming it is a
  compare-and-swap, so of concurrent proposals at most one takes effect. A proposal nobody
  confirmed by its `auto_confirm_at` takes effect on the next read of the state, if it still
  could by hand (`settle_due_proposal`): a group whose owner went offline between
  proposing and confirming does not wait for it to come back.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import time
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from ._errors import ErrorCode, RPCError
from ._gateway_core import Call, Method
from ._group_e2ee_store import GroupE2EEStore, GroupState, next_chain
from ._group_methods import find_group, require_member
from ._group_store import Group

__all__ = ["GROUP_E2EE_STATE_METHODS", "KEY_EPOCH", "MAX_SNAPSHOT_CHARS", "committed_aids", "e2ee_store",
           "settle_due_proposal"]

#: The group key epoch. V2 has no group-wide key to rotate (every message has its own), so the
#: epoch stays 1; membership changes move the signed state version instead.
KEY_EPOCH = 1
#: The largest membership snapshot one proposal may carry (characters of its JSON).
MAX_SNAPSHOT_CHARS = 256 * 1024
#: The longest a proposal may wait for its confirmation, as the proposer asks (seconds).
MAX_AUTO_CONFIRM_SECONDS = 3600
_SPK_ID_PREFIX = "sha256:"


def e2ee_store(call: Call) -> GroupE2EEStore:
    """The group E2EE records of the gateway's database (the store holds no state of its own)."""
    return GroupE2EEStore(call.core.db)


def committed_aids(call: Call, group: Group, state: GroupState | None) -> list[str]:
    """Members who receive key wraps: those the current signed state names (all, before one)."""
    members = [member.aid for member in call.core.groups.members(group.group_id)]
    if state is None:
        return members
    signed = set(state.committed_aids)
    return [aid for aid in members if aid in signed]


def _b64(call_field: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise RPCError.bad_param(call_field, f"'{call_field}' must be base64") from None


async def put_group_pk(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    require_member(call, group)
    device_id, _ = call.own_device()
    key_source = params.text("key_source", default="group_device_prekey", max_length=64)
    if key_source != "group_device_prekey":
        raise RPCError.bad_param("key_source", "'key_source' of a group prekey must be 'group_device_prekey'")
    spk_id = params.text("spk_id", max_length=64)
    spk_pk = params.text("spk_pk", max_length=1024)
    spk_signature = params.text("spk_signature", max_length=512)
    spk_timestamp = params.integer("spk_timestamp")
    spk_der = _b64("spk_pk", spk_pk)
    try:
        key = serialization.load_der_public_key(spk_der)
    except (ValueError, UnsupportedAlgorithm):
        raise RPCError.bad_param("spk_pk", "'spk_pk' must be a DER SubjectPublicKeyInfo") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise RPCError.bad_param("spk_pk", "'spk_pk' must be a P-256 public key")
    if spk_id != _SPK_ID_PREFIX + hashlib.sha256(spk_der).hexdigest()[:16]:
        raise RPCError.bad_param("spk_id", "'spk_id' must be 'sha256:' and the first 16 hex digits of the key's hash")
    cert = core.identities.current(call.aid)
    raw = _b64("spk_signature", spk_signature)
    signed = spk_der + spk_id.encode() + str(spk_timestamp).encode()
    try:
        if cert is None or len(raw) != 64:
            raise InvalidSignature
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        cert.public_key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise RPCError(ErrorCode.SIGNATURE_INVALID, "'spk_signature' does not verify with this AID's certificate",
                       field="spk_signature") from None
    e2ee_store(call).put_prekey(group.group_id, call.aid, device_id, {
        "key_source": key_source, "spk_id": spk_id, "spk_pk": spk_pk, "spk_signature": spk_signature,
        "spk_timestamp": spk_timestamp,
    })
    await core.db.commit()
    core.events.emit("group.prekey.published", group_id=group.group_id, aid=call.aid, device_id=device_id,
                     spk_id=spk_id)
    return {"ok": True, "group_id": group.group_id, "device_id": device_id, "spk_id": spk_id}


def _devices(call: Call, group: Group, aids: list[str]) -> list[dict[str, Any]]:
    """Every device of `aids` a sender wraps for: its group prekey, else its direct prekey, and
    for a member with no prekey at all, its AID key (`device_id` empty: any of its devices reads)."""
    store, devices = e2ee_store(call), []
    for aid in aids:
        found = {row["device_id"]: row for row in call.core.identities.prekeys(aid)}
        found.update({row["device_id"]: row for row in store.prekeys(group.group_id, aid)})
        if not found:
            devices.append({"aid": aid, "device_id": "", "key_source": "aid_master"})
        devices.extend({"aid": aid, **row} for row in found.values())
    return devices


def _state_fields(state: GroupState | None) -> dict[str, Any]:
    if state is None:
        return {"state_version": 0, "state_hash": "", "state_hash_signed": "", "state_chain": "",
                "state_signature": "", "state_actor_aid": "", "state_membership_snapshot": ""}
    return {"state_version": state.state_version, "state_hash": state.state_hash,
            "state_hash_signed": state.state_hash, "state_chain": state.state_chain,
            "state_signature": state.signature, "state_actor_aid": state.actor_aid,
            "state_membership_snapshot": state.membership_snapshot}


async def bootstrap(call: Call) -> dict[str, Any]:
    group = find_group(call)
    require_member(call, group)
    await settle_due_proposal(call, group)
    state = e2ee_store(call).state(group.group_id)
    members = [member.aid for member in call.core.groups.members(group.group_id)]
    committed = committed_aids(call, group, state)
    signed = set(state.committed_aids) if state is not None else set(members)
    return {
        "group_id": group.group_id, "group_aid": group.group_id, "epoch": KEY_EPOCH,
        "devices": _devices(call, group, committed), "member_aids": members, "committed_member_aids": committed,
        "pending_adds": [aid for aid in members if aid not in signed],
        "pending_removes": sorted(signed - set(members)), "audit_recipients": [],
        "e2ee_security_level": "end_to_end", "e2ee_security_warning": "", **_state_fields(state),
    }


async def get_state(call: Call) -> dict[str, Any]:
    group = find_group(call)
    require_member(call, group)
    await settle_due_proposal(call, group)
    state = e2ee_store(call).state(group.group_id)
    if state is None:
        return {"group_id": group.group_id, "group_aid": group.group_id, "state_version": 0, "state_hash": "",
                "prev_state_hash": "", "key_epoch": KEY_EPOCH, "membership_snapshot": "", "policy_snapshot": "",
                "state_chain": ""}
    return state.to_wire(group.group_id)


def _snapshot_aids(call: Call, group: Group, snapshot: str) -> tuple[str, ...]:
    """The AIDs a membership snapshot names, each a current member of `group`."""
    try:
        parsed = json.loads(snapshot)
    except ValueError:
        parsed = None
    rows = parsed.get("members") if isinstance(parsed, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("aid"), str) for r in rows):
        raise RPCError.bad_param("membership_snapshot",
                                 "'membership_snapshot' must be a JSON object whose 'members' lists {aid, devices}")
    aids = tuple(dict.fromkeys(str(r["aid"]) for r in rows))
    current = {member.aid for member in call.core.groups.members(group.group_id)}
    outsiders = sorted(set(aids) - current)
    if outsiders:
        raise RPCError(ErrorCode.GROUP_NOT_MEMBER, f"the snapshot names {outsiders[0]}, who is not a member of "
                       f"{group.group_id}", field="membership_snapshot")
    return aids


async def propose_state(call: Call) -> dict[str, Any]:
    core, params = call.core, call.params
    group = find_group(call)
    member = require_member(call, group, manage=True)
    store = e2ee_store(call)
    state = store.state(group.group_id)
    current_version = state.state_version if state is not None else 0
    version = params.integer("state_version", minimum=1)
    if current_version == 0 and member.role != "owner":
        raise RPCError(ErrorCode.GROUP_ROLE_INSUFFICIENT, f"the first signed state of {group.group_id} is the owner's")
    prev_hash = params.raw.get("prev_state_hash") or ""
    if not isinstance(prev_hash, str):
        raise RPCError.bad_param("prev_state_hash", "'prev_state_hash' must be a string")
    if version != current_version + 1 or prev_hash != (state.state_hash if state is not None else ""):
        raise RPCError(ErrorCode.GROUP_E2EE_STALE, f"{group.group_id} is at state {current_version}: propose "
                       f"{current_version + 1} over its current hash", state_version=current_version)
    state_hash = params.text("state_hash", max_length=256)
    snapshot = params.text("membership_snapshot", max_length=MAX_SNAPSHOT_CHARS)
    aids = _snapshot_aids(call, group, snapshot)
    signature = params.text("signature", max_length=512)
    signed = json.dumps({"group_id": group.group_id, "state_version": version, "state_hash": state_hash,
                         "membership_snapshot": snapshot}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    cert = core.identities.current(call.aid)
    try:
        if cert is None:
            raise InvalidSignature
        cert.public_key.verify(_b64("signature", signature), signed.encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise RPCError(ErrorCode.SIGNATURE_INVALID, "'signature' does not verify with the proposer's certificate",
                       field="signature") from None
    wait = params.integer("auto_confirm_seconds", default=30, maximum=MAX_AUTO_CONFIRM_SECONDS)
    now_ms = int(time.time() * 1000)
    proposal = {
        "proposal_id": "sp-" + secrets.token_hex(8), "group_id": group.group_id, "group_aid": group.group_id,
        "state_version": version, "state_hash": state_hash, "prev_state_hash": prev_hash,
        "key_epoch": params.integer("key_epoch", default=KEY_EPOCH), "membership_snapshot": snapshot,
        "signature": signature, "proposer_aid": call.aid, "committed_aids": list(aids),
        "reason": params.text("reason", default="", max_length=128), "status": "pending", "created_at": now_ms,
        "auto_confirm_at": now_ms + wait * 1000,
    }
    store.put_proposal(group.group_id, proposal)
    await core.db.commit()
    admins = [m.aid for m in core.groups.members(group.group_id) if m.can_manage]
    event = {key: proposal[key] for key in ("group_id", "group_aid", "proposal_id", "state_version", "state_hash",
                                            "proposer_aid", "auto_confirm_at")}

    def push_to_admins() -> None:
        for aid in admins:
            core.push(aid, "group.v2.state_proposed", lambda _session: event)

    call.after_reply.append(push_to_admins)
    return {"group_id": group.group_id, "proposal_id": proposal["proposal_id"], "state_version": version,
            "status": "pending", "auto_confirm_at": proposal["auto_confirm_at"]}


def _public_proposal(proposal: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in proposal.items() if key != "committed_aids"}


async def get_proposal(call: Call) -> dict[str, Any]:
    group = find_group(call)
    require_member(call, group)
    await settle_due_proposal(call, group)
    proposal = e2ee_store(call).proposal(group.group_id)
    return {"group_id": group.group_id, "proposal": None if proposal is None else _public_proposal(proposal)}


def _apply(call: Call, group: Group, state: GroupState | None, pending: dict[str, Any], *,
           actor: str, auto: bool) -> dict[str, Any]:
    """Make `pending` the group's state (its version is the next one), schedule the
    `state_confirmed` push to every member, and return the event pushed."""
    core = call.core
    confirmed = GroupState(
        state_version=pending["state_version"], state_hash=pending["state_hash"],
        prev_state_hash=pending["prev_state_hash"], key_epoch=pending["key_epoch"],
        membership_snapshot=pending["membership_snapshot"], signature=pending["signature"],
        actor_aid=pending["proposer_aid"], state_chain=next_chain(state.state_chain if state else "",
                                                                  pending["state_hash"]),
        committed_aids=tuple(pending["committed_aids"]), confirmed_at=time.time(),
    )
    e2ee_store(call).set_state(group.group_id, confirmed)
    event = {"group_id": group.group_id, "group_aid": group.group_id, "proposal_id": pending["proposal_id"],
             "state_version": confirmed.state_version, "state_hash": confirmed.state_hash,
             "state_chain": confirmed.state_chain, "proposer_aid": confirmed.actor_aid, "actor_aid": actor,
             "auto_confirmed": auto}
    members = [m.aid for m in core.groups.members(group.group_id)]

    def push_to_members() -> None:
        for aid in members:
            core.push(aid, "group.v2.state_confirmed", lambda _session: event)

    call.after_reply.append(push_to_members)
    core.events.emit("group.state.confirmed", group_id=group.group_id, state_version=confirmed.state_version,
                     aids=tuple(sorted(confirmed.committed_aids)), auto=auto)
    return event


async def settle_due_proposal(call: Call, group: Group) -> None:
    """Confirm the group's pending proposal once its `auto_confirm_at` has passed and nobody did.

    The proposal was signed by an owner or admin; it takes effect only if it still could by hand:
    it is the next version over the current state, its proposer still manages the group and every
    AID it names is still a member. Otherwise it is dropped (a newer proposal is needed). Called
    where clients read the state (bootstrap, get_state, get_proposal), never where one proposes:
    a newer proposal replaces a due one, as before.
    """
    store = e2ee_store(call)
    pending = store.proposal(group.group_id)
    if pending is None or pending.get("auto_confirm_at", 0) > time.time() * 1000:
        return
    state = store.state(group.group_id)
    proposer = call.core.groups.member(group.group_id, str(pending["proposer_aid"]))
    members = {member.aid for member in call.core.groups.members(group.group_id)}
    if (pending["state_version"] == (state.state_version if state is not None else 0) + 1
            and proposer is not None and proposer.can_manage and set(pending["committed_aids"]) <= members):
        _apply(call, group, state, pending, actor=str(pending["proposer_aid"]), auto=True)
    else:
        store.drop_proposal(group.group_id)
    await call.core.db.commit()


async def confirm_state(call: Call) -> dict[str, Any]:
    core = call.core
    group = find_group(call)
    require_member(call, group, manage=True)
    proposal_id = call.params.text("proposal_id", max_length=64)
    store = e2ee_store(call)
    pending = store.proposal(group.group_id)
    if pending is None or pending["proposal_id"] != proposal_id:
        raise RPCError(ErrorCode.GROUP_E2EE_STALE, f"{proposal_id!r} is not the pending proposal of {group.group_id} "
                       "(confirmed, replaced or never made)", field="proposal_id")
    state = store.state(group.group_id)
    current_version = state.state_version if state is not None else 0
    if pending["state_version"] != current_version + 1:  # another state took effect first
        store.drop_proposal(group.group_id)
        await core.db.commit()
        raise RPCError(ErrorCode.GROUP_E2EE_STALE, f"{group.group_id} moved to state {current_version} since this "
                       "proposal: propose again", state_version=current_version)
    event = _apply(call, group, state, pending, actor=call.aid, auto=False)
    await core.db.commit()
    return {**event, "status": "confirmed"}


GROUP_E2EE_STATE_METHODS: dict[str, Method] = {
    "group.v2.put_group_pk": Method(put_group_pk),
    "group.v2.bootstrap": Method(bootstrap),
    "group.get_state": Method(get_state),
    "group.v2.propose_state": Method(propose_state),
    "group.v2.get_proposal": Method(get_proposal),
    "group.v2.confirm_state": Method(confirm_state),
}
