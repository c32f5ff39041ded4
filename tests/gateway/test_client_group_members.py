"""The real AUN client leaving and removing group members, and what it means for encryption.

The clients run with their defaults: messages are end-to-end encrypted, and the owner's client
signs a new membership state after every change it hears of.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aun_core import AUNClient

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._group_e2ee_store import GroupE2EEStore

from .conftest import AgentFactory, Events, refused, unique_name


def _text(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}


async def _encrypted_group(gateway: GatewayServer, owner: AUNClient, *members: AUNClient) -> str:
    """A group of ``owner`` and ``members``, returned once a signed state names them all."""
    group_id = str((await owner.call("group.create", {"group_id": unique_name("crew")}))["group"]["group_id"])
    for member in members:
        await owner.call("group.add_member", {"group_id": group_id, "aid": member.aid})
    everyone = tuple(sorted([str(owner.aid), *(str(m.aid) for m in members)]))
    await gateway.events.wait("group.state.confirmed", group_id=group_id, aids=everyone)
    return group_id


async def _next_action(events: Events, action: str) -> dict[str, Any]:
    """The next ``group.changed`` of ``action`` (earlier changes, e.g. a role change, are passed over)."""
    while (change := await events.next())["action"] != action:
        pass
    return change


def _wrapped_aids(gateway: GatewayServer, group_id: str, seq: int) -> set[str]:
    """The AIDs the stored envelope of message ``seq`` carries a key wrap for."""
    row = gateway.core.groups.messages(group_id, seq - 1, 1)[0][0]
    return {wrap[0] for wrap in json.loads(row["envelope_json"])["recipients"]}


async def test_after_a_member_leaves_the_next_encrypted_messages_carry_no_key_for_them(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob, carol = [await make_agent(unique_name(n)) for n in ("alice", "bob", "carol")]
    group_id = await _encrypted_group(gateway, alice, bob, carol)
    at_alice, at_bob = Events(alice, "group.message_created"), Events(bob, "group.message_created")
    changes = Events(alice, "group.changed")
    sent = await carol.call("group.send", {"group_id": group_id, "payload": _text("all three of us")})
    assert _wrapped_aids(gateway, group_id, sent["seq"]) >= {alice.aid, bob.aid}
    assert (await at_bob.next())["payload"]["text"] == "all three of us"
    await at_alice.next()

    carol_keys = {row["spk_id"] for row in GroupE2EEStore(gateway.core.db).prekeys(group_id, carol.aid)}
    assert carol_keys
    left_at = time.time()
    left = await bob.call("group.leave", {"group_id": group_id})
    assert left["left_aid"] == bob.aid and left["group"]["member_count"] == 2
    change = await _next_action(changes, "member_left")
    assert change["member_aid"] == bob.aid
    # The owner's client hears of it and signs a state without bob; the others' clients rotate
    # their group prekeys (the client's own step on a membership change) through the gateway.
    await gateway.events.wait("group.state.confirmed", group_id=group_id, aids=tuple(sorted([alice.aid, carol.aid])))
    rotated = await gateway.events.wait("group.prekey.published", group_id=group_id, aid=carol.aid, after=left_at)
    assert rotated.fields["spk_id"] not in carol_keys

    sent = await carol.call("group.send", {"group_id": group_id, "payload": _text("just us two now")})
    got = await at_alice.next()
    assert (got["payload"]["text"], got["encrypted"]) == ("just us two now", True)
    # Each message has its own key, wrapped per recipient device: none of bob's devices has one.
    assert bob.aid not in _wrapped_aids(gateway, group_id, sent["seq"])
    assert at_bob.drain() == []
    assert await refused(bob, "group.v2.pull", {"group_id": group_id, "after_seq": 0}) == -33006
    assert await refused(bob, "group.send", {"group_id": group_id, "payload": _text("still here?")}) == -33006
    assert await refused(bob, "group.leave", {"group_id": group_id}) == -33006
    assert gateway.core.groups.member(group_id, bob.aid) is None


async def test_admins_remove_members_and_nobody_removes_the_owner(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob, carol, dave = [await make_agent(unique_name(n)) for n in ("alice", "bob", "carol", "dave")]
    group_id = await _encrypted_group(gateway, alice, bob, carol, dave)
    promoted = await alice.call("group.set_role", {"group_id": group_id, "aid": bob.aid, "role": "admin"})
    assert (promoted["member"]["role"], promoted["old_role"]) == ("admin", "member")
    heard_by_carol = Events(carol, "group.changed")
    at_carol = Events(carol, "group.message_created")

    assert await refused(carol, "group.kick", {"group_id": group_id, "aid": dave.aid}) == -33007
    assert await refused(bob, "group.kick", {"group_id": group_id, "aid": alice.aid}) == -32004
    assert await refused(alice, "group.leave", {"group_id": group_id}) == -33002
    removed = await bob.group.kick({"group_id": group_id, "aid": carol.aid})
    assert removed["removed_aid"] == carol.aid
    change = await _next_action(heard_by_carol, "member_removed")  # the removed member is told too
    assert (change["member_aid"], change["actor_aid"]) == (carol.aid, bob.aid)
    assert await refused(bob, "group.remove_member", {"group_id": group_id, "aid": carol.aid}) == -33006
    await gateway.events.wait("group.state.confirmed", group_id=group_id,
                              aids=tuple(sorted([alice.aid, bob.aid, dave.aid])))

    sent = await dave.call("group.send", {"group_id": group_id, "payload": _text("carol is gone")})
    assert _wrapped_aids(gateway, group_id, sent["seq"]) == {alice.aid, bob.aid}
    assert await refused(carol, "group.send", {"group_id": group_id, "payload": _text("let me back")}) == -33006
    assert at_carol.drain() == []
    members = await alice.call("group.get_members", {"group_id": group_id})
    assert {m["aid"] for m in members["members"]} == {alice.aid, bob.aid, dave.aid}
    listed = await carol.call("group.list_my", {})
    assert group_id not in {g["group_id"] for g in listed["groups"]}


async def test_a_dissolved_group_refuses_everything_and_keeps_its_name(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    group_id = await _encrypted_group(gateway, alice, bob)
    heard = Events(bob, "group.changed")
    assert await refused(bob, "group.dissolve", {"group_id": group_id}) == -33007
    dissolved = await alice.group.dissolve({"group_id": group_id})
    assert dissolved["status"] == "dissolved"
    await _next_action(heard, "dissolved")
    for client in (alice, bob):
        assert await refused(client, "group.send", {"group_id": group_id, "payload": _text("hello?")}) == -33002
        assert group_id not in {g["group_id"] for g in (await client.call("group.list_my", {}))["groups"]}
    base = group_id.partition(".")[0]
    assert await refused(alice, "group.create", {"group_id": base}) == -32602
