"""The real AUN client in groups: broadcast, then mention mode, membership rules, offline catch-up."""

from __future__ import annotations

import pytest
from aun_core.errors import AUNError

from aun_runtime.gateway import GatewayServer
from protocols.aun import DispatchMode, parse_dispatch_mode

from .conftest import AgentFactory, Events, unique_name


def _text(payload: str, *mentions: str) -> dict[str, object]:
    return {"type": "text", "text": payload, "mentions": [{"aid": aid} for aid in mentions]}


async def test_group_broadcast_then_mention_mode(gateway: GatewayServer, make_agent: AgentFactory) -> None:
    alice, bob, carol = [await make_agent(unique_name(n)) for n in ("alice", "bob", "carol")]
    at_bob, at_carol, at_alice = (Events(c, "group.message_created") for c in (bob, carol, alice))
    created = await alice.call("group.create", {"name": "team", "group_id": unique_name("team")})
    group_id = created["group"]["group_id"]
    assert created["group"]["owner_aid"] == alice.aid and created["group"]["mention_mode"] == "disabled"
    for member in (bob, carol):
        await alice.call("group.add_member", {"group_id": group_id, "aid": member.aid})
    members = await bob.call("group.get_members", {"group_id": group_id})
    assert {m["aid"] for m in members["members"]} == {alice.aid, bob.aid, carol.aid}

    await alice.call("group.send", {"group_id": group_id, "payload": _text("hello all"), "encrypt": False})
    for inbox in (at_bob, at_carol):
        got = await inbox.next()
        assert (got["from"], got["payload"]["text"], got["group_id"]) == (alice.aid, "hello all", group_id)
        assert parse_dispatch_mode(got["mention_mode"]) is DispatchMode.BROADCAST

    await alice.call("group.set_settings", {"group_id": group_id, "settings": {"mention_mode": "mention-only"}})
    await alice.call("group.send", {"group_id": group_id, "payload": _text("bob, look", bob.aid), "encrypt": False})
    # Delivery is to every member; the mode travels with the message for each receiver's channel.
    for inbox in (at_bob, at_carol):
        got = await inbox.next()
        assert got["payload"]["text"] == "bob, look"
        assert parse_dispatch_mode(got["mention_mode"]) is DispatchMode.MENTION
        assert got["payload"]["mentions"] == [{"aid": bob.aid}]

    # The older spelling works too and is not retroactive.
    await alice.call("group.set_settings", {"group_id": group_id, "settings": {"dispatch_mode": "broadcast"}})
    await alice.call("group.send", {"group_id": group_id, "payload": _text("back to all"), "encrypt": False})
    got = await at_carol.next()
    assert got["payload"]["text"] == "back to all" and parse_dispatch_mode(got["mention_mode"]) is DispatchMode.BROADCAST
    history = await bob.call("group.v2.pull", {"group_id": group_id, "after_seq": 0, "limit": 10})
    assert [m.get("mention_mode") for m in history["messages"]] == ["disabled", "mention-only", "disabled"]
    assert at_alice.drain() == []  # the sender's own messages are not delivered back to it


async def test_group_membership_is_enforced(gateway: GatewayServer, make_agent: AgentFactory) -> None:
    alice, bob, dave = [await make_agent(unique_name(n)) for n in ("alice", "bob", "dave")]
    group_id = (await alice.call("group.create", {"group_id": unique_name("club")}))["group"]["group_id"]
    await alice.call("group.add_member", {"group_id": group_id, "aid": bob.aid})
    with pytest.raises(AUNError) as outsider:
        await dave.call("group.send", {"group_id": group_id, "payload": _text("let me in"), "encrypt": False})
    assert outsider.value.code == -33006
    with pytest.raises(AUNError) as reader:
        await dave.call("group.get_members", {"group_id": group_id})
    assert reader.value.code == -33006
    with pytest.raises(AUNError) as member:
        await bob.call("group.add_member", {"group_id": group_id, "aid": dave.aid})
    assert member.value.code == -33007
    with pytest.raises(AUNError) as settings:
        await bob.call("group.set_settings", {"group_id": group_id, "settings": {"mention_mode": "mention-only"}})
    assert settings.value.code == -33007
    assert gateway.core.groups.get(group_id).message_seq == 0  # type: ignore[union-attr]


async def test_member_offline_during_a_post_catches_up_on_connect(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, carol = await make_agent(unique_name("alice")), await make_agent(unique_name("carol"))
    carol_aid, carol_name = carol.aid, carol.aid.split(".")[0]
    group_id = (await alice.call("group.create", {"group_id": unique_name("crew")}))["group"]["group_id"]
    await alice.call("group.add_member", {"group_id": group_id, "aid": carol_aid})
    await carol.close()
    await gateway.events.wait("disconnected", aid=carol_aid)
    for text in ("missed one", "missed two"):
        await alice.call("group.send", {"group_id": group_id, "payload": _text(text), "encrypt": False})
    carol = await make_agent(carol_name, connect=False)
    inbox = Events(carol, "group.message_created")
    await carol.connect({"auto_reconnect": True})
    received = await inbox.take(2)
    assert [m["payload"]["text"] for m in received] == ["missed one", "missed two"]
