"""Raw frames that try to cheat: replayed nonces, stolen tokens, impersonation, retries."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path

import pytest
import websockets
from cryptography.hazmat.primitives.asymmetric import ec

from aun_runtime.gateway import GatewayLimits, GatewayServer

from .conftest import (
    PendingLogin,
    RawConnection,
    RawIdentity,
    raw_register,
    register_client,
    spki_b64,
    start_login,
    unique_name,
)


async def eventually_logged_in_again(gateway: GatewayServer, aid: str, before: int) -> None:
    for _ in range(300):
        if len(gateway.events.find("auth.login", aid=aid)) > before and gateway.connected_aids().count(aid):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{aid} did not log in again")


async def raw_register_again(server: GatewayServer, me: RawIdentity) -> RawIdentity:
    """Log ``me`` in once more (a new token family), with its key."""
    conn = await RawConnection.open(server)
    phase1 = (await conn.call("auth.aid_login1", {"aid": me.aid, "cert": me.cert_pem, "client_nonce": "n0nce"}))["result"]
    phase2 = (await conn.call("auth.aid_login2", PendingLogin(conn, me.aid, me.key, me.cert_pem, phase1).proof()))["result"]
    await conn.close()
    return RawIdentity(me.aid, me.key, me.cert_pem, phase2["access_token"], phase2["refresh_token"])


async def test_challenge_nonce_is_bound_to_its_socket_and_single_use(gateway: GatewayServer) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    first, second = await RawConnection.open(gateway), await RawConnection.open(gateway)
    stolen = first.challenge["params"]["nonce"]
    answer = await second.call("auth.connect", {"nonce": stolen, "auth": {"token": me.access_token},
                                                "device": {"id": "d1"}})
    assert answer["error"]["code"] == 4010
    params = {"nonce": stolen, "auth": {"token": me.access_token}, "device": {"id": "d1"}}
    assert (await first.call("auth.connect", params))["result"]["status"] == "ok"
    again = await first.call("auth.connect", params)
    assert again["error"]["code"] == -32600  # a socket authenticates once
    await first.close()
    await second.close()


async def test_bad_or_revoked_tokens_are_refused_by_connect(gateway: GatewayServer) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    conn = await RawConnection.open(gateway)
    nonce = conn.challenge["params"]["nonce"]
    answer = await conn.call("auth.connect", {"nonce": nonce, "auth": {"token": "guessed"}, "device": {"id": "d"}})
    assert answer["error"]["code"] == 4001
    gateway.revoke_access_tokens(me.aid)
    answer = await conn.call("auth.connect", {"nonce": nonce, "auth": {"token": me.access_token}, "device": {"id": "d"}})
    assert answer["error"]["code"] == 4001 and "revoked" in answer["error"]["message"]
    await conn.close()


async def test_unconnected_socket_is_closed_at_the_challenge_deadline(tmp_path: Path) -> None:
    async with GatewayServer(port=0, data_dir=tmp_path / "gw", limits=GatewayLimits(challenge_ttl=0.2)) as server:
        conn = await RawConnection.open(server)
        try:
            await conn.answer(timeout=10)
        except websockets.ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 1008
        else:
            raise AssertionError("the socket stayed open past its challenge deadline")


async def test_login_nonce_is_single_use(gateway: GatewayServer) -> None:
    login = await start_login(gateway, unique_name("alice"))
    proof = login.proof()
    assert (await login.conn.call("auth.aid_login2", proof))["result"]["status"] == "ok"
    assert (await login.conn.call("auth.aid_login2", proof))["error"]["code"] == -32002  # replayed
    await login.conn.close()


async def test_login_nonce_deadline(tmp_path: Path) -> None:
    async with GatewayServer(port=0, data_dir=tmp_path / "gw", limits=GatewayLimits(login_nonce_ttl=0.0)) as server:
        login = await start_login(server, unique_name("alice"))
        assert (await login.conn.call("auth.aid_login2", login.proof()))["error"]["code"] == -32002
        await login.conn.close()


async def test_login_needs_the_aids_own_key_and_an_aid_keeps_its_key(gateway: GatewayServer) -> None:
    login = await start_login(gateway, unique_name("alice"))
    thief = ec.generate_private_key(ec.SECP256R1())
    answer = await login.conn.call("auth.aid_login2", login.proof(signer=thief))
    assert answer["error"]["code"] == -32003  # no proof of possession, no token
    taken = await login.conn.call("auth.create_aid", {"aid": login.aid, "public_key": spki_b64(thief)})
    assert taken["error"]["code"] == -32004  # nobody re-registers an AID with another key
    again = await login.conn.call("auth.create_aid", {"aid": login.aid, "public_key": spki_b64(login.key)})
    assert again["result"]["cert"] == login.cert_pem  # the owner registering again gets the same certificate
    await login.conn.close()


async def test_refresh_rotates_and_a_reused_refresh_token_ends_the_family(gateway: GatewayServer) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    conn = await RawConnection.open(gateway)
    rotated = (await conn.call("auth.refresh_token", {"refresh_token": me.refresh_token, "aid": me.aid}))["result"]
    assert rotated["success"] is True and rotated["refresh_token"] != me.refresh_token
    reused = (await conn.call("auth.refresh_token", {"refresh_token": me.refresh_token}))["result"]
    assert reused == {"success": False, "error": "refresh_token_reused", "relogin_required": True}
    # The leak ends the whole family: even the rotated token no longer works.
    after = (await conn.call("auth.refresh_token", {"refresh_token": rotated["refresh_token"]}))["result"]
    assert after["success"] is False and after["relogin_required"] is True
    await conn.close()


async def test_connections_of_a_family_revoked_for_reuse_are_closed(
    gateway: GatewayServer, caplog: pytest.LogCaptureFixture
) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    stolen = await me.connect(gateway, device_id="thief")  # connected with the family's first access token
    other_login = await raw_register_again(gateway, me)  # a second login: a family of its own
    unrelated = await other_login.connect(gateway, device_id="owner")
    refresher = await RawConnection.open(gateway)
    rotated = (await refresher.call("auth.refresh_token", {"refresh_token": me.refresh_token}))["result"]
    me.access_token = rotated["access_token"]
    also_stolen = await me.connect(gateway, device_id="thief-2")  # the same family, after a rotation
    caplog.set_level(logging.WARNING, "aun_runtime.gateway")
    reused = (await refresher.call("auth.refresh_token", {"refresh_token": me.refresh_token}))["result"]
    assert reused["error"] == "refresh_token_reused"
    for conn in (stolen, also_stolen):
        await asyncio.wait_for(conn.ws.wait_closed(), 5)
        assert conn.ws.close_code == 4005 and "revoked" in (conn.ws.close_reason or "")
    [line] = [r for r in caplog.records if "token family was revoked" in r.getMessage()]
    assert "2 connection(s)" in line.getMessage() and line.exc_info is None
    assert (await unrelated.call("meta.ping"))["result"]["pong"] is True  # another login's connection stays
    assert (await refresher.call("meta.ping"))["error"]["code"] == -32013  # the refreshing socket never connected
    await unrelated.close()
    await refresher.close()


async def test_the_real_client_whose_family_is_revoked_logs_in_again_with_its_key(
    gateway: GatewayServer, tmp_path: Path
) -> None:
    bob = await register_client(gateway, tmp_path / "agents", unique_name("bob"))
    await bob.connect({"auto_reconnect": True, "retry_initial_delay": 0.2, "retry_max_delay": 1.0})
    try:
        [session] = gateway.core.sessions_of(bob.aid or "")
        logins = len(gateway.events.find("auth.login", aid=bob.aid))
        gateway.core.identities.revoke_family(gateway.core._family_of[session])  # what a reused refresh token does
        await gateway.events.wait("disconnected", aid=bob.aid, connection_id=session.id)
        # Not 4001, after which the client would stop: it comes back, through a login only its key allows.
        await eventually_logged_in_again(gateway, bob.aid or "", logins)
        assert bob.is_ready
    finally:
        await bob.close()


async def test_impersonation_is_refused(gateway: GatewayServer) -> None:
    alice, bob, mallory = [await raw_register(gateway, unique_name(n)) for n in ("alice", "bob", "mallory")]
    to_bob = await alice.connect(gateway)
    await to_bob.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": "for bob only"}})
    group = (await to_bob.call("group.create", {"group_id": unique_name("inner")}))["result"]["group"]["group_id"]
    await to_bob.call("group.add_member", {"group_id": group, "aid": bob.aid})

    m = await mallory.connect(gateway)
    # Claiming to be bob in the params changes nothing: the sender is the connection.
    sent = (await m.call("message.send", {"to": alice.aid, "from_aid": bob.aid, "sender_aid": bob.aid,
                                          "payload": {"type": "text", "text": "it is me, bob"}}))["result"]
    rows, _ = gateway.core.inboxes.pull(alice.aid, mallory.aid, 0, 10)
    assert sent["seq"] == 1 and rows[0]["from_aid"] == mallory.aid
    assert gateway.core.inboxes.pull(alice.aid, bob.aid, 0, 10) == ([], False)
    # Signing as bob is refused outright.
    forged = mallory.sign("message.send", {"to": alice.aid, "payload": {"type": "text", "text": "x"}}, as_aid=bob.aid)
    assert (await m.call("message.send", forged))["error"]["code"] == -32003
    # Mallory's pulls read Mallory's inbox: nothing from alice, whatever bob has.
    pulled = (await m.call("message.v2.pull", {"cursor_scope": "peer", "sender_aid": alice.aid}))["result"]
    assert pulled["messages"] == []
    assert (await m.call("message.v2.pull", {"cursor_scope": "peer", "sender_aid": alice.aid, "aid": bob.aid}))[
        "error"]["code"] == -32004
    peers = (await m.call("message.peers", {"filter": "all"}))["result"]
    assert peers["peers"] == []
    # Posting to, reading or joining a group she is not in.
    assert (await m.call("group.send", {"group_id": group, "payload": {"type": "text", "text": "hi"}}))[
        "error"]["code"] == -33006
    assert (await m.call("group.v2.pull", {"group_id": group}))["error"]["code"] == -33006
    assert (await m.call("group.add_member", {"group_id": group, "aid": mallory.aid}))["error"]["code"] == -33006
    assert (await m.call("message.v2.put_peer_pk", {"peer_aid": bob.aid, "spk_id": "x", "spk_pk": "x",
                                                    "spk_signature": "x", "spk_timestamp": 1}))["error"]["code"] == -32602
    for conn in (to_bob, m):
        await conn.close()


async def test_retried_send_is_idempotent(gateway: GatewayServer) -> None:
    alice, bob, carol = [await raw_register(gateway, unique_name(n)) for n in ("alice", "bob", "carol")]
    conn = await alice.connect(gateway)
    params = {"to": bob.aid, "payload": {"type": "text", "text": "once"}, "message_id": "m-retry"}
    first = (await conn.call("message.send", params))["result"]
    second = (await conn.call("message.send", alice.sign("message.send", params)))["result"]
    assert (second["seq"], second["status"]) == (first["seq"], "duplicate")
    assert len(gateway.core.inboxes.pull(bob.aid, alice.aid, 0, 10)[0]) == 1
    elsewhere = await conn.call("message.send", {**params, "to": carol.aid})
    assert elsewhere["error"]["code"] == -32602 and elsewhere["error"]["data"]["field"] == "message_id"
    group = (await conn.call("group.create", {"group_id": unique_name("dup")}))["result"]["group"]["group_id"]
    post = {"group_id": group, "payload": {"type": "text", "text": "once"}, "message_id": "g-retry"}
    seqs = [(await conn.call("group.send", post))["result"]["message"]["seq"] for _ in range(3)]
    assert seqs == [1, 1, 1]
    await conn.close()


async def test_acks_never_move_backwards_and_stop_at_the_head(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    a = await alice.connect(gateway)
    for text in ("1", "2", "3"):
        await a.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": text}})
    b = await bob.connect(gateway)
    scope = {"cursor_scope": "peer", "sender_aid": alice.aid}
    assert (await b.call("message.v2.ack", {**scope, "up_to_seq": 2}))["result"]["effective_ack_seq"] == 2
    assert (await b.call("message.v2.ack", {**scope, "up_to_seq": 1}))["result"]["effective_ack_seq"] == 2
    assert (await b.call("message.v2.ack", {**scope, "up_to_seq": 99}))["result"]["effective_ack_seq"] == 3
    pending = (await b.call("message.peers", {"filter": "pending"}))["result"]
    assert pending["peers"] == []
    page = (await b.call("message.v2.pull", {**scope, "after_seq": 0, "limit": 2}))["result"]
    assert [json.dumps(m["legacy_v1"]["payload"]["text"]) for m in page["messages"]] == ['"1"', '"2"']
    assert page["persistent_has_more"] is True and page["covered_through_seq"] == 2 < page["head_seq"] == 3
    for conn in (a, b):
        await conn.close()


async def test_a_receiver_that_stops_reading_is_dropped_and_loses_nothing(tmp_path: Path) -> None:
    limits = GatewayLimits(outbound_frames=2)
    async with GatewayServer(port=0, data_dir=tmp_path / "gw", limits=limits) as server:
        alice, bob = await raw_register(server, unique_name("alice")), await raw_register(server, unique_name("bob"))
        sleeper = await bob.connect(server)  # reads nothing from here on
        # A small receive buffer makes "stops reading" bite after a few frames instead of many MB.
        sleeper.ws.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sender = await alice.connect(server)
        big = "z" * 600_000
        count = 0
        while bob.aid in server.connected_aids():  # fill the socket buffers, then the outbound queue
            count += 1
            answer = await sender.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": big}})
            assert "result" in answer
            assert count < 200, "the slow receiver was never dropped"
        await server.events.wait("disconnected", aid=bob.aid)
        await sleeper.ws.close()
        # Everything sent was stored: bob pulls all of it on a new connection.
        fresh = await bob.connect(server, device_id="raw-device")
        seqs: list[int] = []
        after = 0
        while True:
            page = (await fresh.call("message.v2.pull", {"cursor_scope": "peer", "sender_aid": alice.aid,
                                                         "after_seq": after, "limit": 200}))["result"]
            assert 1 <= len(page["messages"]) <= 2  # pages are bounded by bytes, not only by count
            seqs += [m["seq"] for m in page["messages"]]
            after = page["next_after_seq"]
            if not page["has_more"]:
                break
        assert seqs == list(range(1, count + 1))
        await fresh.close()
        await sender.close()


async def test_a_member_added_later_reads_only_what_was_posted_after(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    a = await alice.connect(gateway)
    group = (await a.call("group.create", {"group_id": unique_name("late")}))["result"]["group"]["group_id"]
    for text in ("before bob 1", "before bob 2"):
        await a.call("group.send", {"group_id": group, "payload": {"type": "text", "text": text}})
    member = (await a.call("group.add_member", {"group_id": group, "aid": bob.aid}))["result"]["member"]
    assert member["join_seq"] == 2
    await a.call("group.send", {"group_id": group, "payload": {"type": "text", "text": "welcome bob"}})
    b = await bob.connect(gateway)
    page = (await b.call("group.v2.pull", {"group_id": group, "after_seq": 0}))["result"]
    assert [m["payload"]["text"] for m in page["messages"]] == ["welcome bob"]
    assert page["cursor"]["join_seq"] == 2
    for conn in (a, b):
        await conn.close()
