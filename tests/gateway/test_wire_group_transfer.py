"""Owner transfers on the wire: each wrong proof, caller or key gets its own error."""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from aun_runtime.gateway import GatewayServer

from .conftest import RawConnection, RawIdentity, error_of, raw_register, spki_b64, unique_name


def _proof(key: ec.EllipticCurvePrivateKey, *parts: str, issued_ms: int | None = None) -> dict[str, Any]:
    nonce, issued = "n-" + str(time.time_ns()), int(time.time() * 1000) if issued_ms is None else issued_ms
    signed = "|".join([*parts, nonce, str(issued)]).encode()
    return {"nonce": nonce, "issued_ms": issued,
            "signature": base64.b64encode(key.sign(signed, ec.ECDSA(hashes.SHA256()))).decode()}


class Named:
    """A named group whose AID key the test holds, with its members' raw connections."""

    def __init__(self, group_id: str, key: ec.EllipticCurvePrivateKey,
                 members: list[tuple[RawIdentity, RawConnection]]) -> None:
        self.group_id, self.key, self.members = group_id, key, members

    def auth(self, new_owner: str, *, key: ec.EllipticCurvePrivateKey | None = None,
             issued_ms: int | None = None) -> dict[str, Any]:
        proof = _proof(key or self.key, "aun-group-owner-transfer-v1", self.group_id, self.group_id, new_owner,
                       issued_ms=issued_ms)
        return {"group_id": self.group_id, "new_owner": new_owner, "transfer_auth": proof}

    def accept(self, who: RawIdentity, new_key: ec.EllipticCurvePrivateKey, *,
               signer: ec.EllipticCurvePrivateKey | None = None) -> dict[str, Any]:
        public = spki_b64(new_key)
        proof = _proof(signer or who.key, "aun-group-owner-transfer-accept-v1", self.group_id, self.group_id, who.aid,
                       hashlib.sha256(public.encode()).hexdigest())
        return {"group_id": self.group_id, "public_key": public, "transfer_accept": proof}


async def _named(gateway: GatewayServer, *names: str) -> Named:
    members = []
    for name in names:
        identity = await raw_register(gateway, unique_name(name))
        members.append((identity, await identity.connect(gateway)))
    key = ec.generate_private_key(ec.SECP256R1())
    owner = members[0][1]
    created = await owner.call("group.create", {"group_id": unique_name("named"), "public_key": spki_b64(key)})
    group_id = created["result"]["group"]["group_id"]
    for identity, _ in members[1:]:
        assert "result" in await owner.call("group.add_member", {"group_id": group_id, "aid": identity.aid})
    return Named(group_id, key, members)


async def test_asking_for_a_transfer_needs_the_owner_a_member_and_the_group_keys_signature(
    gateway: GatewayServer,
) -> None:
    group = await _named(gateway, "alice", "bob", "carol")
    (alice, a), (bob, b), (carol, _) = group.members
    outsider = await raw_register(gateway, unique_name("mallory"))
    assert error_of(await b.call("group.transfer_owner", group.auth(carol.aid)))[0] == -33007
    assert error_of(await a.call("group.transfer_owner", group.auth(outsider.aid)))[0] == -33006
    assert error_of(await a.call("group.transfer_owner", group.auth(alice.aid))) == (-32602, "new_owner")
    assert error_of(await a.call("group.transfer_owner", group.auth(bob.aid, key=alice.key))) == (
        -32003, "transfer_auth.signature")
    stale = group.auth(bob.aid, issued_ms=int(time.time() * 1000) - 3_600_000)
    assert error_of(await a.call("group.transfer_owner", stale)) == (-32602, "transfer_auth.issued_ms")
    assert error_of(await a.call("group.transfer_owner", {"group_id": group.group_id, "new_owner": bob.aid})) == (
        -32602, "transfer_auth")
    # A group without an AID of its own has nothing to transfer this way.
    plain = (await a.call("group.create", {"group_id": unique_name("plain")}))["result"]["group"]["group_id"]
    assert "result" in await a.call("group.add_member", {"group_id": plain, "aid": bob.aid})
    unbound = await a.call("group.transfer_owner", {**group.auth(bob.aid), "group_id": plain})
    assert error_of(unbound)[0] == -33002 and unbound["error"]["data"]["reason"] == "no_group_aid"
    # Asking changes nothing yet.
    assert gateway.core.groups.get(group.group_id).owner_aid == alice.aid  # type: ignore[union-attr]


async def test_only_the_pending_new_owner_completes_with_a_new_key_of_its_own_signing(
    gateway: GatewayServer,
) -> None:
    group = await _named(gateway, "alice", "bob", "carol")
    (alice, a), (bob, b), (carol, c) = group.members
    new_key = ec.generate_private_key(ec.SECP256R1())
    assert error_of(await b.call("group.complete_transfer", group.accept(bob, new_key)))[0] == -33002
    asked = (await a.call("group.transfer_owner", group.auth(bob.aid)))["result"]
    assert (asked["status"], asked["new_owner"]) == ("pending_rekey", bob.aid)
    assert error_of(await c.call("group.complete_transfer", group.accept(carol, new_key)))[0] == -32004
    same_key = group.accept(bob, group.key)
    assert error_of(await b.call("group.complete_transfer", same_key)) == (-32602, "public_key")
    forged = group.accept(bob, new_key, signer=carol.key)
    assert error_of(await b.call("group.complete_transfer", forged)) == (-32003, "transfer_accept.signature")

    done = (await b.call("group.complete_transfer", group.accept(bob, new_key)))["result"]
    assert (done["status"], done["old_owner"], done["new_owner"]) == ("transferred", alice.aid, bob.aid)
    assert "BEGIN CERTIFICATE" in done["aid_cert"]["cert"]
    again = (await b.call("group.complete_transfer", group.accept(bob, new_key)))["result"]
    assert again["status"] == "transferred" and again["aid_cert"]["serial"] == done["aid_cert"]["serial"]
    members = (await a.call("group.get_members", {"group_id": group.group_id}))["result"]["members"]
    assert {m["aid"]: m["role"] for m in members}[alice.aid] == "admin"
    # The old group key authorises nothing now; the new one does.
    assert error_of(await b.call("group.transfer_owner", group.auth(carol.aid)))[0] == -32003
    group.key = new_key
    assert "result" in await b.call("group.transfer_owner", group.auth(carol.aid))


async def test_a_pending_transfer_ends_when_its_new_owner_leaves(gateway: GatewayServer) -> None:
    group = await _named(gateway, "alice", "bob")
    (_, a), (bob, b) = group.members
    assert "result" in await a.call("group.transfer_owner", group.auth(bob.aid))
    assert "result" in await b.call("group.leave", {"group_id": group.group_id})
    assert "result" in await a.call("group.add_member", {"group_id": group.group_id, "aid": bob.aid})
    new_key = ec.generate_private_key(ec.SECP256R1())
    ended = await b.call("group.complete_transfer", group.accept(bob, new_key))
    assert error_of(ended)[0] == -33002 and ended["error"]["data"]["reason"] == "no_pending_transfer"
