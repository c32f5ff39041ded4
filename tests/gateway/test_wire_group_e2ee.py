"""Group end-to-end encryption on the wire: each bad, oversize or impersonating request gets its own error.

The frames are made by hand, so each can be wrong in exactly one way. The gateway never decrypts,
so an envelope's crypto fields here are placeholders; what it checks is who made the envelope, for
which group, epoch and signed state, and for whom.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from aun_runtime.gateway import GatewayLimits, GatewayServer
from aun_runtime.gateway._group_e2ee_send_methods import MAX_ENVELOPE_CHARS, MAX_RECIPIENTS
from aun_runtime.gateway._group_e2ee_state_methods import MAX_SNAPSHOT_CHARS
from aun_runtime.gateway._group_e2ee_store import MAX_DEVICES_PER_MEMBER, GroupE2EEStore

from .conftest import RawConnection, RawIdentity, error_of, raw_register, unique_name

DEVICE = "raw-device"


class Member:
    def __init__(self, identity: RawIdentity, conn: RawConnection) -> None:
        self.identity, self.conn, self.aid = identity, conn, identity.aid

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.conn.call(method, params)


async def _member(gateway: GatewayServer, name: str) -> Member:
    identity = await raw_register(gateway, unique_name(name))
    return Member(identity, await identity.connect(gateway, DEVICE))


async def _group(gateway: GatewayServer, *names: str) -> tuple[str, list[Member]]:
    members = [await _member(gateway, name) for name in names]
    owner = members[0]
    answer = await owner.call("group.create", {"group_id": unique_name("wire")})
    group_id = answer["result"]["group"]["group_id"]
    for member in members[1:]:
        assert "result" in await owner.call("group.add_member", {"group_id": group_id, "aid": member.aid})
    return group_id, members


def _envelope(sender: Member, group_id: str, message_id: str, to: list[str], *, state_version: int = 0,
              epoch: int = 1) -> dict[str, Any]:
    rows = [[aid, DEVICE, "member", "peer_device_prekey", "fp", "", "bm9uY2U=", "d3JhcA=="] for aid in to]
    return {
        "type": "e2ee.group_encrypted", "version": "v2", "group_id": group_id, "epoch": epoch,
        "nonce": "bm9uY2U=", "ciphertext": "Y2lwaGVy", "tag": "dGFn", "sender_signature": "c2ln",
        "sender_session_pk": "cGs=", "recipients_digest": "00", "recipients": rows,
        "aad": {"from": sender.aid, "from_device": DEVICE, "group_id": group_id, "epoch": epoch,
                "message_id": message_id, "state_commitment": {"state_version": state_version}},
    }


def _send(group_id: str, envelope: dict[str, Any]) -> dict[str, Any]:
    return {"group_id": group_id, "message_id": envelope["aad"]["message_id"], "envelope": envelope}


async def test_a_well_formed_envelope_is_stored_and_pushed_to_the_other_members(gateway: GatewayServer) -> None:
    group_id, (alice, bob) = await _group(gateway, "alice", "bob")
    envelope = _envelope(alice, group_id, "m-1", [bob.aid])
    answer = await alice.call("group.v2.send", _send(group_id, envelope))
    assert answer["result"]["seq"] == 1
    again = await alice.call("group.v2.send", _send(group_id, envelope))
    assert again["result"]["seq"] == 1  # a retried send finds its first copy
    await bob.conn.call("meta.ping", {})
    pushed = [p for p in bob.conn.pushes if p["method"] == "event/group.v2.message_created"]
    # Its digest ("00") is not its wraps' Merkle root, so no share of it proves anything: bob gets
    # it whole, and his client's own check refuses it.
    assert len(pushed) == 1 and json.loads(pushed[0]["params"]["inline_message"]["envelope_json"]) == envelope
    assert not [p for p in alice.conn.pushes if p["method"] == "event/group.v2.message_created"]
    pulled = (await bob.call("group.v2.pull", {"group_id": group_id, "after_seq": 0}))["result"]["messages"]
    assert [(m["seq"], m["version"], m["from_aid"]) for m in pulled] == [(1, "v2", alice.aid)]


async def test_each_member_device_is_pushed_its_own_wrap_with_the_proof_the_sender_signed_it(
    gateway: GatewayServer,
) -> None:
    from aun_core.v2.crypto.recipients import compute_leaf_hash, compute_merkle_root, verify_merkle_proof

    group_id, (alice, bob, carol, dave) = await _group(gateway, "alice", "bob", "carol", "dave")
    envelope = _envelope(alice, group_id, "m-1", [bob.aid, carol.aid, dave.aid])
    envelope["recipients"][2][1] = ""  # dave's wrap is for every device of his AID
    envelope["recipients_digest"] = compute_merkle_root(envelope["recipients"])  # the real client's root
    assert "result" in await alice.call("group.v2.send", _send(group_id, envelope))

    for member, row in zip((bob, carol, dave), envelope["recipients"], strict=True):
        await member.conn.call("meta.ping", {})
        (push,) = [p["params"] for p in member.conn.pushes if p["method"] == "event/group.v2.message_created"]
        share = json.loads(push["inline_message"]["envelope_json"])
        assert "recipients" not in share and share["recipient"] == dict(zip(
            ("aid", "device_id", "role", "key_source", "fp", "spk_id", "wrap_nonce", "wrapped_key"), row, strict=True))
        # The real client's check: the leaf of this wrap and the proof give the signed root.
        assert verify_merkle_proof(compute_leaf_hash(row), share["merkle_proof"], envelope["recipients_digest"])
        assert {key: value for key, value in share.items() if key not in ("recipient", "merkle_proof", "delivery_device_id")} \
            == {key: value for key, value in envelope.items() if key != "recipients"}
        assert share.get("delivery_device_id") == (DEVICE if member is dave else None)
    # A proof holds for its own wrap only.
    assert not verify_merkle_proof(compute_leaf_hash(envelope["recipients"][1]), share["merkle_proof"],
                                   envelope["recipients_digest"])
    # What the log keeps, and a pull answers, is the whole envelope.
    pulled = (await bob.call("group.v2.pull", {"group_id": group_id, "after_seq": 0}))["result"]["messages"]
    assert json.loads(pulled[0]["envelope_json"]) == envelope


async def test_a_device_behind_on_its_acknowledgements_is_pushed_the_whole_envelope(gateway: GatewayServer) -> None:
    from aun_core.v2.crypto.recipients import compute_merkle_root

    group_id, (alice, bob) = await _group(gateway, "alice", "bob")

    async def post(message_id: str) -> dict[str, Any]:
        envelope = _envelope(alice, group_id, message_id, [bob.aid])
        envelope["recipients_digest"] = compute_merkle_root(envelope["recipients"])
        assert "result" in await alice.call("group.v2.send", _send(group_id, envelope))
        await bob.conn.call("meta.ping", {})
        push = [p["params"] for p in bob.conn.pushes if p["method"] == "event/group.v2.message_created"][-1]
        return json.loads(push["inline_message"]["envelope_json"])

    assert "recipient" in await post("m-1")  # bob has seen everything before it: his share
    # A burst: bob has not acknowledged 1 when 2 comes, so his client would not take 2 from the
    # push; the whole envelope makes it pull what it has not seen, as one page.
    assert "recipients" in await post("m-2")
    assert "result" in await bob.call("group.v2.ack", {"group_id": group_id, "up_to_seq": 2})
    assert "recipient" in await post("m-3")


async def test_envelopes_made_by_or_for_someone_else_are_refused(gateway: GatewayServer) -> None:
    group_id, (alice, bob, carol) = await _group(gateway, "alice", "bob", "carol")
    outsider = await _member(gateway, "mallory")
    to = [bob.aid, carol.aid]

    forged = _envelope(alice, group_id, "m-forged", to)
    forged["aad"]["from"] = bob.aid  # alice posing as bob
    assert error_of(await alice.call("group.v2.send", _send(group_id, forged))) == (-32004, "envelope.aad.from")
    other_device = _envelope(alice, group_id, "m-device", to)
    other_device["aad"]["from_device"] = "someone-elses-phone"
    assert error_of(await alice.call("group.v2.send", _send(group_id, other_device))) == (-32004, "envelope.aad.from_device")
    elsewhere = _envelope(alice, f"other{group_id}", "m-elsewhere", to)
    assert error_of(await alice.call("group.v2.send", _send(group_id, elsewhere))) == (-32602, "envelope.aad.group_id")
    mismatched = _envelope(alice, group_id, "m-a", to)
    assert error_of(await alice.call("group.v2.send", {**_send(group_id, mismatched), "message_id": "m-b"})) == (
        -32602, "envelope.aad.message_id")

    not_member = _envelope(outsider, group_id, "m-out", [alice.aid])
    assert error_of(await outsider.call("group.v2.send", _send(group_id, not_member)))[0] == -33006
    assert error_of(await outsider.call("group.v2.bootstrap", {"group_id": group_id}))[0] == -33006
    stranger = _envelope(alice, group_id, "m-stranger", [*to, outsider.aid])
    assert error_of(await alice.call("group.v2.send", _send(group_id, stranger))) == (-33006, "envelope.recipients")
    missing = await alice.call("group.v2.send", _send(group_id, _envelope(alice, group_id, "m-missing", [bob.aid])))
    assert missing["error"]["code"] == -33052 and missing["error"]["data"]["expected_peer_aids"] == [carol.aid]
    assert gateway.core.groups.get(group_id).message_seq == 0  # type: ignore[union-attr]


async def test_an_envelope_for_an_older_epoch_or_state_asks_for_a_new_bootstrap(gateway: GatewayServer) -> None:
    group_id, (alice, bob) = await _group(gateway, "alice", "bob")
    stale_state = _envelope(alice, group_id, "m-state", [bob.aid], state_version=3)
    answer = await alice.call("group.v2.send", _send(group_id, stale_state))
    assert answer["error"]["code"] == -33050 and answer["error"]["data"]["state_version"] == 0
    stale_epoch = _envelope(alice, group_id, "m-epoch", [bob.aid], epoch=7)
    assert (await alice.call("group.v2.send", _send(group_id, stale_epoch)))["error"]["code"] == -33050


async def test_malformed_and_oversize_envelopes_are_refused(gateway: GatewayServer) -> None:
    group_id, (alice, bob) = await _group(gateway, "alice", "bob")
    plain = _envelope(alice, group_id, "m-type", [bob.aid])
    plain["type"] = "text"
    assert error_of(await alice.call("group.v2.send", _send(group_id, plain))) == (-32602, "envelope.type")
    no_tag = _envelope(alice, group_id, "m-tag", [bob.aid])
    del no_tag["tag"]
    assert error_of(await alice.call("group.v2.send", _send(group_id, no_tag))) == (-32602, "envelope.tag")
    bad_row = _envelope(alice, group_id, "m-row", [bob.aid])
    bad_row["recipients"][0] = bad_row["recipients"][0][:3]
    assert error_of(await alice.call("group.v2.send", _send(group_id, bad_row))) == (-32602, "envelope.recipients")
    bad_role = _envelope(alice, group_id, "m-role", [bob.aid])
    bad_role["recipients"][0][2] = "owner"
    assert error_of(await alice.call("group.v2.send", _send(group_id, bad_role))) == (-32602, "envelope.recipients")
    too_many = _envelope(alice, group_id, "m-many", [bob.aid] * (MAX_RECIPIENTS + 1))
    answer = await alice.call("group.v2.send", _send(group_id, too_many))
    assert error_of(answer) == (-32602, "envelope.recipients") and answer["error"]["data"]["limit"] == MAX_RECIPIENTS
    huge = _envelope(alice, group_id, "m-huge", [bob.aid])
    huge["ciphertext"] = "A" * MAX_ENVELOPE_CHARS
    answer = await alice.call("group.v2.send", _send(group_id, huge))
    assert error_of(answer) == (-32602, "envelope") and answer["error"]["data"]["limit"] == MAX_ENVELOPE_CHARS
    assert error_of(await alice.call("group.v2.send", {"group_id": group_id, "message_id": "m-x"})) == (-32602, "envelope")
    assert gateway.core.groups.get(group_id).message_seq == 0  # type: ignore[union-attr]


def _spk(identity: RawIdentity, *, signer: ec.EllipticCurvePrivateKey | None = None) -> dict[str, Any]:
    """A group prekey as the client publishes it: an SPK signed (raw r||s) by the AID key."""
    spk = ec.generate_private_key(ec.SECP256R1())
    der = spk.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    spk_id = "sha256:" + hashlib.sha256(der).hexdigest()[:16]
    stamp = int(time.time())
    r, s = decode_dss_signature((signer or identity.key).sign(der + spk_id.encode() + str(stamp).encode(),
                                                              ec.ECDSA(hashes.SHA256())))
    return {"key_source": "group_device_prekey", "spk_id": spk_id, "spk_pk": base64.b64encode(der).decode(),
            "spk_signature": base64.b64encode(r.to_bytes(32, "big") + s.to_bytes(32, "big")).decode(),
            "spk_timestamp": stamp}


async def test_group_prekeys_are_checked_against_the_aids_certificate(gateway: GatewayServer) -> None:
    group_id, (alice, bob) = await _group(gateway, "alice", "bob")
    good = _spk(bob.identity)
    assert (await bob.call("group.v2.put_group_pk", {"group_id": group_id, **good}))["result"]["spk_id"] == good["spk_id"]
    boot = (await alice.call("group.v2.bootstrap", {"group_id": group_id}))["result"]
    bobs = [d for d in boot["devices"] if d["aid"] == bob.aid]
    assert [(d["device_id"], d["key_source"], d["spk_id"]) for d in bobs] == [(DEVICE, "group_device_prekey", good["spk_id"])]

    by_alice = _spk(bob.identity, signer=alice.identity.key)  # bob publishing a key alice signed
    assert error_of(await bob.call("group.v2.put_group_pk", {"group_id": group_id, **by_alice})) == (-32003, "spk_signature")
    wrong_id = {**_spk(bob.identity), "spk_id": "sha256:0000000000000000"}
    assert error_of(await bob.call("group.v2.put_group_pk", {"group_id": group_id, **wrong_id})) == (-32602, "spk_id")
    not_a_key = {**_spk(bob.identity), "spk_pk": base64.b64encode(b"not a key").decode()}
    assert error_of(await bob.call("group.v2.put_group_pk", {"group_id": group_id, **not_a_key})) == (-32602, "spk_pk")
    other_device = {**_spk(bob.identity), "device_id": "alices-phone"}
    assert error_of(await bob.call("group.v2.put_group_pk", {"group_id": group_id, **other_device})) == (-32004, "device_id")
    outsider = await _member(gateway, "mallory")
    assert error_of(await outsider.call("group.v2.put_group_pk", {"group_id": group_id, **_spk(outsider.identity)}))[0] == -33006


def test_group_prekeys_per_member_are_bounded(gateway: GatewayServer) -> None:
    store = GroupE2EEStore(gateway.core.db)
    for n in range(MAX_DEVICES_PER_MEMBER + 3):
        store.put_prekey("g.example", "bob.example", f"device-{n:02d}", {"spk_id": str(n)})
    kept = [row["device_id"] for row in store.prekeys("g.example", "bob.example")]
    assert kept == [f"device-{n:02d}" for n in range(3, MAX_DEVICES_PER_MEMBER + 3)]


def _proposal(member: Member, group_id: str, version: int, aids: list[str], *, prev: str = "",
              signer: ec.EllipticCurvePrivateKey | None = None, snapshot: str | None = None) -> dict[str, Any]:
    snapshot = snapshot if snapshot is not None else json.dumps(
        {"members": [{"aid": aid, "devices": []} for aid in aids]}, sort_keys=True, separators=(",", ":"))
    state_hash = hashlib.sha256(f"{version}{snapshot}".encode()).hexdigest()
    signed = json.dumps({"group_id": group_id, "state_version": version, "state_hash": state_hash,
                         "membership_snapshot": snapshot}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    signature = (signer or member.identity.key).sign(signed.encode(), ec.ECDSA(hashes.SHA256()))
    return {"group_id": group_id, "state_version": version, "state_hash": state_hash, "prev_state_hash": prev,
            "membership_snapshot": snapshot, "signature": base64.b64encode(signature).decode()}


async def test_signed_states_are_proposed_by_admins_confirmed_once_and_gate_the_recipients(
    gateway: GatewayServer,
) -> None:
    group_id, (alice, bob, carol) = await _group(gateway, "alice", "bob", "carol")
    # Only the owner signs the first state; only owners and admins propose or confirm.
    assert error_of(await bob.call("group.v2.propose_state", _proposal(bob, group_id, 1, [alice.aid])))[0] == -33007
    forged = _proposal(alice, group_id, 1, [alice.aid, bob.aid], signer=bob.identity.key)
    assert error_of(await alice.call("group.v2.propose_state", forged)) == (-32003, "signature")
    assert error_of(await alice.call("group.v2.propose_state", _proposal(alice, group_id, 2, [alice.aid])))[0] == -33050
    outsider = await _member(gateway, "mallory")
    with_outsider = _proposal(alice, group_id, 1, [alice.aid, outsider.aid])
    assert error_of(await alice.call("group.v2.propose_state", with_outsider)) == (-33006, "membership_snapshot")
    not_json = _proposal(alice, group_id, 1, [], snapshot="[not json")
    assert error_of(await alice.call("group.v2.propose_state", not_json)) == (-32602, "membership_snapshot")
    huge = _proposal(alice, group_id, 1, [], snapshot="x" * (MAX_SNAPSHOT_CHARS + 1))
    assert error_of(await alice.call("group.v2.propose_state", huge)) == (-32602, "membership_snapshot")

    # A state naming alice and bob: carol is pending, so she is no recipient until a state names her.
    first = _proposal(alice, group_id, 1, [alice.aid, bob.aid])
    proposal_id = (await alice.call("group.v2.propose_state", first))["result"]["proposal_id"]
    pending = (await bob.call("group.v2.get_proposal", {"group_id": group_id}))["result"]["proposal"]
    assert (pending["proposal_id"], pending["state_version"], pending["proposer_aid"]) == (proposal_id, 1, alice.aid)
    assert error_of(await bob.call("group.v2.confirm_state", {"group_id": group_id, "proposal_id": proposal_id}))[0] == -33007
    assert error_of(await alice.call("group.v2.confirm_state", {"group_id": group_id, "proposal_id": "sp-nope"}))[0] == -33050
    confirmed = (await alice.call("group.v2.confirm_state", {"group_id": group_id, "proposal_id": proposal_id}))["result"]
    assert confirmed["state_version"] == 1 and confirmed["state_chain"]
    assert error_of(await alice.call("group.v2.confirm_state", {"group_id": group_id, "proposal_id": proposal_id}))[0] == -33050
    await carol.conn.call("meta.ping", {})
    assert [p["params"]["state_version"] for p in carol.conn.pushes if p["method"] == "event/group.v2.state_confirmed"] == [1]

    boot = (await bob.call("group.v2.bootstrap", {"group_id": group_id}))["result"]
    assert (boot["state_version"], boot["pending_adds"], boot["state_actor_aid"]) == (1, [carol.aid], alice.aid)
    assert carol.aid not in {d["aid"] for d in boot["devices"]}
    wraps_carol = _envelope(alice, group_id, "m-carol", [bob.aid, carol.aid], state_version=1)
    assert error_of(await alice.call("group.v2.send", _send(group_id, wraps_carol))) == (-33006, "envelope.recipients")
    assert "result" in await alice.call("group.v2.send", _send(group_id, _envelope(alice, group_id, "m-ok", [bob.aid],
                                                                                        state_version=1)))
    # The next state must build on this one's hash.
    assert error_of(await alice.call("group.v2.propose_state", _proposal(alice, group_id, 2, [alice.aid])))[0] == -33050
    second = _proposal(alice, group_id, 2, [alice.aid, bob.aid, carol.aid], prev=confirmed["state_hash"])
    assert "result" in await alice.call("group.v2.propose_state", second)
    state = (await carol.call("group.get_state", {"group_id": group_id}))["result"]
    assert state["state_version"] == 1  # proposed, not yet confirmed


async def test_a_tail_window_pull_answers_the_newest_messages_and_the_window_they_prove(
    gateway: GatewayServer,
) -> None:
    group_id, (alice, bob) = await _group(gateway, "alice", "bob")
    for n in range(1, 4):
        assert "result" in await alice.call("group.v2.send", _send(group_id, _envelope(alice, group_id, f"m-{n}", [bob.aid])))
    carol = await _member(gateway, "carol")
    assert "result" in await alice.call("group.add_member", {"group_id": group_id, "aid": carol.aid})
    for n in range(4, 6):
        envelope = _envelope(alice, group_id, f"m-{n}", [bob.aid, carol.aid])
        assert "result" in await alice.call("group.v2.send", _send(group_id, envelope))

    tail = (await bob.call("group.v2.pull", {"group_id": group_id, "window_mode": "tail", "after_seq": 0, "limit": 2}))
    window = tail["result"]
    assert (window["window_mode"], window["window_start_seq"], window["head_seq"], window["covered_through_seq"]) == (
        "tail", 4, 5, 5)
    assert [m["seq"] for m in window["messages"]] == [4, 5]
    assert window["cursor"]["current_seq"] == 0  # a tail pull moves no cursor
    caught_up = (await bob.call("group.v2.pull", {"group_id": group_id, "window_mode": "tail", "after_seq": 5}))["result"]
    assert (caught_up["window_start_seq"], caught_up["head_seq"], caught_up["messages"]) == (5, 5, [])
    # A member added later sees nothing from before it joined, in a tail window too.
    late = (await carol.call("group.v2.pull", {"group_id": group_id, "window_mode": "tail", "after_seq": 0}))["result"]
    assert [m["seq"] for m in late["messages"]] == [4, 5] and late["window_start_seq"] == 1

    head_mode = await bob.call("group.v2.pull", {"group_id": group_id, "window_mode": "head", "after_seq": 0})
    assert error_of(head_mode) == (-32602, "window_mode")
    acking = await bob.call("group.v2.pull", {"group_id": group_id, "window_mode": "tail", "ack_up_to_seq": 5})
    assert error_of(acking) == (-32602, "ack_up_to_seq")


async def test_a_tail_window_cut_by_the_page_byte_bound_proves_only_what_it_holds(tmp_path: Path) -> None:
    async with GatewayServer("127.0.0.1", port=0, data_dir=tmp_path / "gw",
                             limits=GatewayLimits(max_page_bytes=1000)) as gateway:
        group_id, (alice, bob) = await _group(gateway, "alice", "bob")
        for n in range(1, 4):
            envelope = _envelope(alice, group_id, f"m-{n}", [bob.aid])
            assert "result" in await alice.call("group.v2.send", _send(group_id, envelope))
        window = (await bob.call("group.v2.pull", {"group_id": group_id, "window_mode": "tail", "after_seq": 0}))["result"]
        assert [m["seq"] for m in window["messages"]] == [3]  # one row always fits; two do not
        assert (window["window_start_seq"], window["head_seq"]) == (3, 3)
        for member in (alice, bob):
            await member.conn.close()


async def test_a_wrap_for_a_member_who_left_since_the_state_was_signed_asks_for_a_new_bootstrap(
    gateway: GatewayServer,
) -> None:
    group_id, (alice, bob, carol) = await _group(gateway, "alice", "bob", "carol")
    first = _proposal(alice, group_id, 1, [alice.aid, bob.aid, carol.aid])
    proposal_id = (await alice.call("group.v2.propose_state", first))["result"]["proposal_id"]
    assert "result" in await alice.call("group.v2.confirm_state", {"group_id": group_id, "proposal_id": proposal_id})
    assert "result" in await carol.call("group.leave", {"group_id": group_id})
    # The state still names carol, but she gets no wraps any more: an envelope for her is stale.
    boot = (await bob.call("group.v2.bootstrap", {"group_id": group_id}))["result"]
    assert (boot["committed_member_aids"], boot["pending_removes"]) == ([alice.aid, bob.aid], [carol.aid])
    stale = await alice.call("group.v2.send", _send(group_id, _envelope(alice, group_id, "m-1", [bob.aid, carol.aid],
                                                                          state_version=1)))
    assert error_of(stale) == (-33050, None) and stale["error"]["data"]["departed_aids"] == [carol.aid]
    fresh = _envelope(alice, group_id, "m-2", [bob.aid], state_version=1)
    assert "result" in await alice.call("group.v2.send", _send(group_id, fresh))
    # Her group prekeys are gone, and a pending proposal that named her is dropped with her.
    assert GroupE2EEStore(gateway.core.db).prekeys(group_id, carol.aid) == []
    second = _proposal(alice, group_id, 2, [alice.aid, bob.aid], prev=first["state_hash"])
    assert "result" in await alice.call("group.v2.propose_state", second)
    assert "result" in await bob.call("group.leave", {"group_id": group_id})
    assert (await alice.call("group.v2.get_proposal", {"group_id": group_id}))["result"]["proposal"] is None


async def test_a_proposal_nobody_confirmed_by_its_auto_confirm_at_takes_effect_on_the_next_read(
    gateway: GatewayServer,
) -> None:
    group_id, (alice, bob, carol) = await _group(gateway, "alice", "bob", "carol")
    waiting = _proposal(alice, group_id, 1, [alice.aid, bob.aid])
    assert "result" in await alice.call("group.v2.propose_state", waiting)  # due in 30 s: it waits
    assert (await bob.call("group.v2.bootstrap", {"group_id": group_id}))["result"]["state_version"] == 0
    due = {**_proposal(alice, group_id, 1, [alice.aid, bob.aid, carol.aid]), "auto_confirm_seconds": 0}
    proposal_id = (await alice.call("group.v2.propose_state", due))["result"]["proposal_id"]
    # The owner never confirms; a plain member's next read of the state makes it take effect.
    boot = (await carol.call("group.v2.bootstrap", {"group_id": group_id}))["result"]
    assert (boot["state_version"], boot["state_actor_aid"], boot["pending_adds"]) == (1, alice.aid, [])
    assert (await bob.call("group.v2.get_proposal", {"group_id": group_id}))["result"]["proposal"] is None
    await bob.conn.call("meta.ping", {})
    confirmed = [p["params"] for p in bob.conn.pushes if p["method"] == "event/group.v2.state_confirmed"]
    assert [(c["proposal_id"], c["auto_confirmed"]) for c in confirmed] == [(proposal_id, True)]

    # One that could no longer be confirmed by hand is dropped instead: its proposer is no admin now.
    assert "result" in await alice.call("group.set_role", {"group_id": group_id, "aid": bob.aid, "role": "admin"})
    by_bob = {**_proposal(bob, group_id, 2, [alice.aid, bob.aid], prev=due["state_hash"]), "auto_confirm_seconds": 0}
    assert "result" in await bob.call("group.v2.propose_state", by_bob)
    assert "result" in await alice.call("group.set_role", {"group_id": group_id, "aid": bob.aid, "role": "member"})
    assert (await carol.call("group.get_state", {"group_id": group_id}))["result"]["state_version"] == 1
    assert (await alice.call("group.v2.get_proposal", {"group_id": group_id}))["result"]["proposal"] is None
