"""The real AUN client (fastaun 0.5.25) against our gateway: identity, direct messages, encryption, tokens."""

from __future__ import annotations

import json
import sqlite3

import pytest

from aun_runtime.gateway import GatewayServer

from .conftest import AgentFactory, Events, unique_name

# fastaun 0.5.25 reads a deprecated websockets attribute when its connection closes; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


async def test_register_login_connect(gateway: GatewayServer, make_agent: AgentFactory) -> None:
    client = await make_agent(unique_name("alice"))
    assert client.aid in gateway.connected_aids()
    assert gateway.events.find("aid.registered", aid=client.aid)
    assert gateway.events.find("auth.login", aid=client.aid)
    status = await client.call("meta.status", {})
    assert status["aid"] == client.aid and status["mode"] == "gateway"
    pong = await client.call("meta.ping", {})
    assert pong["pong"] is True


async def test_direct_message_arrives_online_through_the_push(gateway: GatewayServer, make_agent: AgentFactory) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    inbox = Events(bob, "message.received")
    sources = []
    for i in range(5):
        sent = await alice.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": f"hi {i}"},
                                                 "encrypt": False})
        got = await inbox.next()
        assert (got["from"], got["payload"]["text"], got["seq"], got["encrypted"]) == (alice.aid, f"hi {i}", sent["seq"], False)
        sources.append(got["source"])
        # The gateway pushed the whole message to bob's open connection as soon as it was stored.
        stored = await gateway.events.wait("message.stored", message_id=sent["message_id"])
        assert stored.fields["pushed"] == 1 and sent["status"] == "delivered"
        await gateway.events.wait("message.acked", receiver=bob.aid, sender=alice.aid, ack_seq=sent["seq"])
    # The first message from a new sender goes through the peer directory; once bob's client knows
    # alice's stream, it takes messages straight from the push ("inline_push"). Which of the two it
    # uses for a message that arrives while it is still recording the previous ack is its own choice.
    assert "inline_push" in sources and set(sources) <= {"inline_push", "pull"}
    assert inbox.drain() == []


async def test_offline_messages_arrive_after_reconnect_none_lost_none_twice(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    bob_aid = bob.aid
    inbox = Events(bob, "message.received")
    before = await alice.call("message.send", {"to": bob_aid, "payload": {"type": "text", "text": "before"},
                                               "encrypt": False})
    assert (await inbox.next())["payload"]["text"] == "before"
    # Delivery is at least once: the client acknowledges after its handler ran. Once acknowledged,
    # a message is never delivered again.
    await gateway.events.wait("message.acked", receiver=bob_aid, sender=alice.aid, ack_seq=before["seq"])
    await bob.close()
    await gateway.events.wait("disconnected", aid=bob_aid)
    texts = [f"offline {i}" for i in range(7)]
    for text in texts:
        result = await alice.call("message.send", {"to": bob_aid, "payload": {"type": "text", "text": text},
                                                   "encrypt": False})
        assert result["status"] == "stored"  # nobody online to push to: kept for the pull
    last_seq = result["seq"]
    bob_again = await make_agent(bob_aid.split(".")[0], connect=False)
    inbox = Events(bob_again, "message.received")
    await bob_again.connect({"auto_reconnect": True})
    received = await inbox.take(len(texts))
    assert [m["payload"]["text"] for m in received] == texts
    assert all(m["source"] == "pull" for m in received)
    await gateway.events.wait("message.acked", receiver=bob_aid, sender=alice.aid, ack_seq=last_seq)
    # Everything was acknowledged: the pending directory is empty.
    peers = await bob_again.call("message.peers", {"filter": "pending"})
    assert peers["peers"] == []
    assert inbox.drain() == []  # and nothing came twice


async def test_encrypted_message_decrypts_at_receiver_and_server_stores_only_ciphertext(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    inbox = Events(bob, "message.received")
    secret = "the launch code is 0000 — 秘密"
    await alice.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": secret}})  # E2EE by default
    got = await inbox.next()
    assert got["encrypted"] is True and got["payload"]["text"] == secret and got["from"] == alice.aid
    db = sqlite3.connect(gateway.data_dir / "gateway.sqlite3")
    bodies = [json.loads(body) for (body,) in db.execute("SELECT body FROM inbox WHERE receiver = ?", (bob.aid,))]
    db.close()
    assert len(bodies) == 1
    stored = bodies[0]["legacy_v1"]["payload"]
    assert stored["type"] == "e2ee.p2p_encrypted" and "ciphertext" in stored
    assert secret not in json.dumps(bodies[0], ensure_ascii=False) and "launch code" not in json.dumps(bodies[0])


async def test_token_refresh_rotates_and_the_client_reconnects(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    inbox = Events(bob, "message.received")
    old_refresh = gateway.core.db.row(
        "SELECT COUNT(*) FROM tokens WHERE aid = ? AND kind = 'refresh' AND revoked = 0", (bob.aid,)
    )[0]
    assert old_refresh == 1
    # Revoke bob's access token and drop his connection: his client must refresh to get back in.
    assert gateway.revoke_access_tokens(bob.aid) == 1
    # A normal closure (1000) makes the client reconnect within about a second; after a close it reads
    # as the server's decision (1012, 1013...) it waits at least 16 s, to avoid reconnect storms.
    assert await gateway.disconnect(bob.aid, code=1000) == 1
    refreshed = await gateway.events.wait("token.refreshed", aid=bob.aid, timeout=30)
    await gateway.events.wait("connected", aid=bob.aid, after=refreshed.at, timeout=30)
    rows = gateway.core.db.rows(
        "SELECT revoked FROM tokens WHERE aid = ? AND kind = 'refresh' ORDER BY refresh_count", (bob.aid,)
    )
    assert [r[0] for r in rows] == [1, 0]  # the old refresh token was rotated out
    await alice.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": "after refresh"},
                                      "encrypt": False})
    assert (await inbox.next(timeout=30))["payload"]["text"] == "after refresh"
