"""The real client's ``create_group`` with group AIDs: certified by the gateway's CA, kept in the
owner's AID store, with the group's card signed by the group and published by its owner."""

from __future__ import annotations

import base64
import hashlib
import time

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from aun_runtime.gateway import GatewayServer

from .conftest import AgentFactory, Events, Owner, RawIdentity, raw_register, spki_b64, unique_name


async def _card(gateway: GatewayServer, aid: str) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as http, http.get(f"{gateway.http_url}/agent.md", headers={"Host": aid}) as got:
        return got.status, {key.lower(): value for key, value in got.headers.items()}, await got.text()


async def test_create_group_binds_a_certified_group_aid_and_publishes_its_card(
    gateway: GatewayServer, owner: Owner
) -> None:
    alice, store = await owner(unique_name("alice"))
    created = await alice.create_group({"name": "Night Shift"}, aid_store=store)
    group_aid = created["group"]["group_aid"]
    assert group_aid == created["group"]["group_id"] and created["group"]["owner_aid"] == alice.aid

    # The certificate is the gateway CA's, for the group AID, and the owner's store holds its key.
    record = gateway.core.identities.current(group_aid)
    assert record is not None
    cert, fingerprint = record.cert, "sha256:" + record.cert_sha256
    assert cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == group_aid
    issuer = gateway.core.pki.issuer_cert
    assert cert.issuer == issuer.subject
    issuer_key = issuer.public_key()
    assert isinstance(issuer_key, ec.EllipticCurvePublicKey)
    issuer_key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))  # type: ignore[arg-type]
    loaded = store.load(group_aid)
    assert loaded.ok and loaded.data is not None and loaded.data["aid"].cert_fingerprint == fingerprint

    # Its card is published, signed by the group, naming the owner, with the owner projection.
    status, headers, body = await _card(gateway, group_aid)
    assert status == 200 and 'type: "group"' in body and f'owner: "{alice.aid}"' in body
    assert headers["x-aun-entity-owner-aid"] == alice.aid
    assert headers["x-aun-entity-cert-fingerprint"] == fingerprint


async def test_a_named_group_gets_its_name_as_its_aid(
    gateway: GatewayServer, owner: Owner
) -> None:
    alice, store = await owner(unique_name("alice"))
    name = unique_name("nightshift")
    created = await alice.create_group({"group_name": name, "name": "Night Shift"}, aid_store=store)
    assert created["group"]["group_aid"] == f"{name}.{gateway.issuer}"
    assert gateway.core.cards.get(f"{name}.{gateway.issuer}") is not None


async def test_a_group_made_with_create_group_carries_encrypted_messages(
    gateway: GatewayServer, make_agent: AgentFactory, owner: Owner
) -> None:
    (alice, store), bob = await owner(unique_name("alice")), await make_agent(unique_name("bob"))
    at_alice = Events(alice, "group.message_created")
    group_id = (await alice.create_group({"name": "pair"}, aid_store=store))["group"]["group_id"]
    await alice.call("group.add_member", {"group_id": group_id, "aid": bob.aid})
    await gateway.events.wait("group.state.confirmed", group_id=group_id, state_version=2)
    await bob.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": "sealed note"}})
    got = await at_alice.next()
    assert (got["from"], got["payload"]["text"], got["encrypted"]) == (bob.aid, "sealed note", True)


async def _raw_group(gateway: GatewayServer, owner: RawIdentity) -> str:
    conn = await owner.connect(gateway)
    try:
        answer = await conn.call("group.create", {"group_id": unique_name("raw")})
        return str(answer["result"]["group"]["group_id"])
    finally:
        await conn.close()


async def test_binding_is_the_owners_once_and_for_a_p256_key(gateway: GatewayServer) -> None:
    owner, member = await raw_register(gateway, unique_name("owner")), await raw_register(gateway, unique_name("member"))
    group_id = await _raw_group(gateway, owner)
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    conn = await owner.connect(gateway)
    mconn = await member.connect(gateway)
    try:
        assert "result" in await conn.call("group.add_member", {"group_id": group_id, "aid": member.aid})
        by_member = await mconn.call("group.bind_group_aid", {"group_id": group_id, "public_key": spki_b64(key)})
        assert by_member["error"]["code"] == -33007
        not_a_key = await conn.call("group.bind_group_aid", {"group_id": group_id, "public_key": "bm90IGEga2V5"})
        assert (not_a_key["error"]["code"], not_a_key["error"]["data"]["field"]) == (-32602, "public_key")
        wrong_curve = await conn.call("group.bind_group_aid", {"group_id": group_id, "public_key": spki_b64(key),
                                                               "curve": "P-384"})
        assert (wrong_curve["error"]["code"], wrong_curve["error"]["data"]["field"]) == (-32602, "curve")
        first = (await conn.call("group.bind_group_aid", {"group_id": group_id, "public_key": spki_b64(key)}))["result"]
        again = (await conn.call("group.bind_group_aid", {"group_id": group_id, "public_key": spki_b64(key)}))["result"]
        assert first["aid_cert"]["serial"] == again["aid_cert"]["serial"]  # a retried bind
        rebind = await conn.call("group.bind_group_aid", {"group_id": group_id, "public_key": spki_b64(other)})
        assert (rebind["error"]["code"], rebind["error"]["data"]["field"]) == (-32004, "public_key")
        taken = await conn.call("group.create", {"group_id": member.aid.split(".")[0], "public_key": spki_b64(other)})
        assert (taken["error"]["code"], taken["error"]["data"]["reason"]) == (-32602, "aid_exists")
    finally:
        await conn.close()
        await mconn.close()


async def test_only_the_owner_publishes_a_group_card_and_agents_keep_their_own(
    gateway: GatewayServer, owner: Owner
) -> None:
    alice, store = await owner(unique_name("alice"))
    group_aid = (await alice.create_group({"name": "cards"}, aid_store=store))["group"]["group_aid"]
    bob_raw = await raw_register(gateway, unique_name("bobraw"))
    card = f'---\naid: "{group_aid}"\nname: "x"\ntype: "group"\nversion: "1"\n---\n'
    headers = {"Host": group_aid, "Authorization": f"Bearer {bob_raw.access_token}"}
    async with aiohttp.ClientSession() as http, http.put(f"{gateway.http_url}/agent.md", data=card.encode(),
                                                         headers=headers) as put:
        assert put.status == 403 and (await put.json())["error"]["code"] == "not_owner"
    # An agent's card has no entity projection: it is its own.
    status, answered, _ = await _card(gateway, alice.aid)
    assert "x-aun-entity-owner-aid" not in answered and status in (200, 404)


async def test_certificates_are_answered_as_authoritative_when_asked(gateway: GatewayServer) -> None:
    owner = await raw_register(gateway, unique_name("owner"))
    url = f"{gateway.http_url}/pki/cert/{owner.aid}"
    async with aiohttp.ClientSession() as http:
        async with http.get(url, params={"consistency": "authoritative"}) as got:
            assert got.status == 200 and got.headers["X-AUN-Cert-Consistency"] == "authoritative"
            assert got.headers["X-AUN-Cert-Lifecycle-State"] == "active_signing"
            assert got.headers["X-AUN-Cert-Fingerprint"] == owner.fingerprint
        async with http.get(url) as plain:
            assert plain.status == 200 and "X-AUN-Cert-Consistency" not in plain.headers


async def test_renew_group_aid_replaces_the_key_and_republishes_the_card(gateway: GatewayServer, owner: Owner) -> None:
    alice, store = await owner(unique_name("alice"))
    group_aid = (await alice.create_group({"group_name": unique_name("rotating")}, aid_store=store))["group"]["group_aid"]
    before = gateway.core.identities.current(group_aid)
    card_before = gateway.core.cards.get(group_aid)
    assert before is not None and card_before is not None
    renewed = await alice.renew_group_aid({"group_id": group_aid}, aid_store=store)
    after = gateway.core.identities.current(group_aid)
    assert after is not None and after.serial_hex == renewed["aid_cert"]["serial"] != before.serial_hex
    assert after.spki_sha256 != before.spki_sha256  # a new key
    loaded = store.load(group_aid)
    assert loaded.ok and loaded.data is not None and loaded.data["aid"].cert_fingerprint == "sha256:" + after.cert_sha256
    # The card is published again, naming the new certificate; the old one stays on record.
    status, headers, body = await _card(gateway, group_aid)
    assert status == 200 and headers["etag"] != card_before.etag and after.cert_sha256 in body
    assert headers["x-aun-entity-cert-fingerprint"] == "sha256:" + after.cert_sha256
    assert gateway.core.identities.by_fingerprint(group_aid, "sha256:" + before.cert_sha256) is not None


def _renewal(group_id: str, old: ec.EllipticCurvePrivateKey, new: ec.EllipticCurvePrivateKey, *,
             signer: ec.EllipticCurvePrivateKey | None = None, issued_ms: int | None = None) -> dict[str, object]:
    old_b64, new_b64 = spki_b64(old), spki_b64(new)
    nonce, issued = "n-1", int(time.time() * 1000) if issued_ms is None else issued_ms
    signed = "|".join(["aun-group-aid-renew-v1", group_id, group_id, hashlib.sha256(old_b64.encode()).hexdigest(),
                       hashlib.sha256(new_b64.encode()).hexdigest(), nonce, str(issued)])
    signature = (signer or old).sign(signed.encode(), ec.ECDSA(hashes.SHA256()))
    return {"group_id": group_id, "group_aid": group_id, "old_public_key": old_b64, "new_public_key": new_b64,
            "renew_proof": {"nonce": nonce, "issued_ms": issued, "signature": base64.b64encode(signature).decode()}}


async def test_renewal_needs_the_owner_the_current_key_and_a_fresh_proof(gateway: GatewayServer) -> None:
    owner_id, member = await raw_register(gateway, unique_name("owner")), await raw_register(gateway, unique_name("member"))
    group_id = await _raw_group(gateway, owner_id)
    key, new, stranger = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    conn, mconn = await owner_id.connect(gateway), await member.connect(gateway)
    try:
        unbound = await conn.call("group.renew_group_aid", _renewal(group_id, key, new))
        assert unbound["error"]["code"] == -33002
        assert "result" in await conn.call("group.add_member", {"group_id": group_id, "aid": member.aid})
        assert "result" in await conn.call("group.bind_group_aid", {"group_id": group_id, "public_key": spki_b64(key)})
        assert (await mconn.call("group.renew_group_aid", _renewal(group_id, key, new)))["error"]["code"] == -33007
        wrong_old = await conn.call("group.renew_group_aid", _renewal(group_id, stranger, new))
        assert (wrong_old["error"]["code"], wrong_old["error"]["data"]["field"]) == (-32004, "old_public_key")
        forged = await conn.call("group.renew_group_aid", _renewal(group_id, key, new, signer=stranger))
        assert (forged["error"]["code"], forged["error"]["data"]["field"]) == (-32003, "renew_proof.signature")
        stale = await conn.call("group.renew_group_aid", _renewal(group_id, key, new, issued_ms=1_000))
        assert (stale["error"]["code"], stale["error"]["data"]["field"]) == (-32602, "renew_proof.issued_ms")
        assert gateway.core.identities.current(group_id).public_key.public_numbers() == \
            key.public_key().public_numbers()  # type: ignore[union-attr]
        renewed = (await conn.call("group.renew_group_aid", _renewal(group_id, key, new)))["result"]
        assert gateway.core.identities.current(group_id).serial_hex == renewed["aid_cert"]["serial"]  # type: ignore[union-attr]
        info = (await mconn.call("group.get_info", {"group_id": group_id}))["result"]
        assert (info["group_aid"], info["aid_bound"], info["member"]["role"]) == (group_id, True, "member")
    finally:
        await conn.close()
        await mconn.close()
