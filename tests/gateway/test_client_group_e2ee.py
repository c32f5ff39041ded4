"""The real AUN client's default group messages, end-to-end encrypted, through the gateway.

Nothing here passes ``encrypt``: the client's defaults bootstrap the group's keys, sign its
membership state, wrap every message for each member device, and decrypt on arrival.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aun_core import AUNClient

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._group_e2ee_store import GroupE2EEStore

from .conftest import AgentFactory, Events, Owner, register_client, unique_name

SECRET = "the vault code is 4-8-15-16"


def _text(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}


async def _encrypted_group(gateway: GatewayServer, owner: AUNClient, *members: AUNClient) -> str:
    """A group of ``owner`` and ``members``, returned once its signed state names them all."""
    created = await owner.call("group.create", {"name": "vault", "group_id": unique_name("vault")})
    group_id = str(created["group"]["group_id"])
    for member in members:
        await owner.call("group.add_member", {"group_id": group_id, "aid": member.aid})
    # The owner's client proposes and confirms a new signed state after each change: one for the
    # group's creation, one per member added.
    await gateway.events.wait("group.state.confirmed", group_id=group_id, state_version=1 + len(members))
    return group_id


def _all_stored_text(gateway: GatewayServer) -> str:
    """Every value of every table in the gateway's SQLite file, read directly."""
    path = gateway.data_dir / "gateway.sqlite3"
    gateway.core.db.commit_sync()
    with sqlite3.connect(path) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for table in tables for row in conn.execute(f"SELECT * FROM {table}"))


async def test_members_post_encrypted_and_each_other_member_decrypts(
    gateway: GatewayServer, make_agent: AgentFactory, owner: Owner
) -> None:
    (alice, store), bob, carol = await owner(unique_name("alice")), *[await make_agent(unique_name(n)) for n in ("bob", "carol")]
    at_alice, at_bob, at_carol = (Events(c, "group.message_created") for c in (alice, bob, carol))
    # The client's own API: a group with its own AID, certified by the gateway and kept in alice's store.
    group_id = (await alice.create_group({"name": "vault"}, aid_store=store))["group"]["group_aid"]
    for member in (bob, carol):
        await alice.call("group.add_member", {"group_id": group_id, "aid": member.aid})
    await gateway.events.wait("group.state.confirmed", group_id=group_id, state_version=3)

    sent = await bob.call("group.send", {"group_id": group_id, "payload": _text(SECRET)})
    assert sent["seq"] == 1 and sent["message"]["version"] == "v2"
    for inbox in (at_alice, at_carol):
        got = await inbox.next()
        assert (got["from"], got["group_id"], got["payload"]["text"]) == (bob.aid, group_id, SECRET)
        assert got["encrypted"] is True and got["e2ee"]["version"] == "v2"

    await alice.call("group.send", {"group_id": group_id, "payload": _text("and the door code is 23-42")})
    for inbox in (at_bob, at_carol):
        got = await inbox.next()
        assert (got["from"], got["payload"]["text"], got["encrypted"]) == (alice.aid, "and the door code is 23-42", True)
    assert at_alice.drain() == [] and at_bob.drain() == []  # nobody gets their own message back
    # A member's client takes a message from its push (its device's own wrap, proven) when it has
    # seen everything before it: alice and carol never pull. Bob's own post is a gap to his client
    # (the sending device is not pushed its message), so he pulls to get past it.
    pulled_by = {event.fields["aid"] for event in gateway.events.find("group.messages.pulled", group_id=group_id)}
    assert pulled_by <= {bob.aid}

    # What the gateway stored is ciphertext: the rows are V2 envelopes and no plaintext is anywhere.
    stored = _all_stored_text(gateway)
    assert "e2ee.group_encrypted" in stored
    assert SECRET not in stored and "4-8-15-16" not in stored and "23-42" not in stored
    rows = gateway.core.groups.messages(group_id, 0, 10)[0]
    assert [(r["version"], r["sender_aid"], "payload" in r) for r in rows] == [("v2", bob.aid, False),
                                                                           ("v2", alice.aid, False)]


async def test_the_signed_state_names_every_member_and_every_device_has_a_group_key(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    group_id = await _encrypted_group(gateway, alice, bob)
    # Version 2 names both; the owner's client may sign a third once bob's device keys are in.
    state = await bob.call("group.get_state", {"group_id": group_id})
    assert state["state_version"] >= 2 and state["state_hash"] and state["state_chain"]
    boot = await bob.call("group.v2.bootstrap", {"group_id": group_id})
    assert boot["state_version"] >= 2 and boot["state_actor_aid"] == alice.aid and boot["state_signature"]
    assert set(boot["committed_member_aids"]) == {alice.aid, bob.aid} and boot["pending_adds"] == []
    assert {d["aid"] for d in boot["devices"]} == {alice.aid, bob.aid}
    # A confirmed proposal is no longer pending. The owner's client may already have proposed the
    # next state (it also proposes on the group's membership events, after a delay), so only a
    # proposal past the state read above may be pending.
    pending = (await alice.call("group.v2.get_proposal", {"group_id": group_id}))["proposal"]
    assert pending is None or pending["state_version"] > boot["state_version"]


async def test_a_member_offline_during_posts_decrypts_them_after_reconnecting(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, carol = await make_agent(unique_name("alice")), await make_agent(unique_name("carol"))
    carol_aid, carol_name = carol.aid, carol.aid.split(".")[0]
    group_id = await _encrypted_group(gateway, alice, carol)
    await carol.close()
    await gateway.events.wait("disconnected", aid=carol_aid)
    for text in ("missed one", "missed two"):
        await alice.call("group.send", {"group_id": group_id, "payload": _text(text)})
    carol = await make_agent(carol_name, connect=False)
    inbox = Events(carol, "group.message_created")
    await carol.connect({"auto_reconnect": True})
    received = await inbox.take(2)
    assert [(m["payload"]["text"], m["encrypted"]) for m in received] == [("missed one", True), ("missed two", True)]


async def test_a_member_added_later_reads_only_what_is_posted_after(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob, dave = [await make_agent(unique_name(n)) for n in ("alice", "bob", "dave")]
    at_dave = Events(dave, "group.message_created")
    group_id = await _encrypted_group(gateway, alice, bob)
    await alice.call("group.send", {"group_id": group_id, "payload": _text("before dave")})
    await alice.call("group.add_member", {"group_id": group_id, "aid": dave.aid})
    await gateway.events.wait("group.state.confirmed", group_id=group_id, state_version=3)
    await bob.call("group.send", {"group_id": group_id, "payload": _text("welcome dave")})
    got = await at_dave.next()
    assert (got["from"], got["payload"]["text"]) == (bob.aid, "welcome dave")
    assert at_dave.drain() == []


async def test_plaintext_group_messages_still_work_beside_encrypted_ones(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    at_bob = Events(bob, "group.message_created")
    group_id = await _encrypted_group(gateway, alice, bob)
    await alice.call("group.send", {"group_id": group_id, "payload": _text("in the clear"), "encrypt": False})
    await alice.call("group.send", {"group_id": group_id, "payload": _text("sealed")})
    first, second = await at_bob.take(2)
    assert (first["payload"]["text"], first["encrypted"]) == ("in the clear", False)
    assert (second["payload"]["text"], second["encrypted"]) == ("sealed", True)


async def test_the_signed_state_and_encrypted_messages_survive_a_restart(tmp_path: Path) -> None:
    data, home = tmp_path / "gateway", tmp_path / "agents"
    alice_name, bob_name = unique_name("alice"), unique_name("bob")
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as first:
        port = first.port
        alice, bob = await register_client(first, home, alice_name), await register_client(first, home, bob_name)
        await alice.connect({"auto_reconnect": False})
        await bob.connect({"auto_reconnect": False})
        group_id = await _encrypted_group(first, alice, bob)
        await bob.close()
        await alice.call("group.send", {"group_id": group_id, "payload": _text("kept across the restart")})
        await alice.close()
        # At least 2; the owner's client may sign one more once bob's device keys are in.
        signed = await _state_version(first, group_id)
        assert signed >= 2

    async with GatewayServer("127.0.0.1", port=port, data_dir=data) as second:
        assert (await _state_version(second, group_id)) == signed
        alice, bob = await register_client(second, home, alice_name), await register_client(second, home, bob_name)
        at_bob = Events(bob, "group.message_created")
        await bob.connect({"auto_reconnect": False})
        await alice.connect({"auto_reconnect": False})
        try:
            got = await at_bob.next()
            assert (got["payload"]["text"], got["encrypted"]) == ("kept across the restart", True)
            # The state the owner signed before the restart is the one senders encrypt against now.
            await alice.call("group.send", {"group_id": group_id, "payload": _text("and after it")})
            got = await at_bob.next()
            assert (got["payload"]["text"], got["encrypted"]) == ("and after it", True)
        finally:
            await alice.close()
            await bob.close()


async def _state_version(gateway: GatewayServer, group_id: str) -> int:
    state = GroupE2EEStore(gateway.core.db).state(group_id)
    return 0 if state is None else state.state_version
