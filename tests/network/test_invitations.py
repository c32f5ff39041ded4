"""Invitations into network groups: an exposed AID accepts them only when its gateway agent is told
to (all of them, or those a policy says yes to), and then reads the group's encrypted messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aun_runtime import RecordKind
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgentConfig

from .conftest import PlainClient, eventually, info_of
from .test_groups import Bridged, Clients, inboxes, kinds_for


async def _invite(gateway: GatewayServer, owner: PlainClient, name: str, *invitees: str) -> str:
    group_id = str((await owner.client.call("group.create", {"group_id": name, "name": name}))["group"]["group_id"])
    for invitee in invitees:
        await owner.client.call("group.invite_member", {"group_id": group_id, "invitee_aid": invitee})
        await gateway.events.wait("group.invite.created", group_id=group_id, invitee=invitee)
    return group_id


async def test_accepted_invitations_make_the_agent_a_member_that_reads_encrypted_messages(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    anna = f"anna.{info.issuer}"
    runtime, agent = await bridged(info, "first", inboxes("anna"), accept_invitations=True)
    user = await plain_clients(info, "user")
    group_id = await _invite(gateway, user, "invited", anna)
    await gateway.events.wait("group.invite.accepted", group_id=group_id, invitee=anna)
    # The owner's client hears anna joined and signs a state that names her.
    await gateway.events.wait("group.state.confirmed", group_id=group_id, aids=tuple(sorted([anna, user.aid])))
    await user.client.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": "welcome"}})
    await eventually(lambda: kinds_for(runtime, anna, "welcome") == [RecordKind.RECEIVED], what="anna's copy")
    [got] = [r.message for r in runtime.archive.history(anna) if r.message and r.message.text == "welcome"]
    assert (got.group_id, got.from_aid) == (group_id, user.aid)
    assert agent.stats.received >= 1 and runtime.archive.dead_letters() == []


async def test_by_default_an_invitation_waits_and_a_policy_chooses_which(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    bert, cleo = f"bert.{info.issuer}", f"cleo.{info.issuer}"
    asked: list[tuple[str, str]] = []

    def only_from_friends(aid: str, invitation: Mapping[str, Any]) -> bool:
        asked.append((aid, str(invitation.get("group_id"))))
        return friend.aid in (invitation.get("inviter_aids") or ())

    await bridged(info, "plain", inboxes("bert"))  # GatewayAgentConfig's default
    await bridged(info, "picky", inboxes("cleo"), accept_invitations=only_from_friends)
    friend, stranger = await plain_clients(info, "friend"), await plain_clients(info, "stranger")
    from_stranger = await _invite(gateway, stranger, "spam", bert, cleo)
    from_friend = await _invite(gateway, friend, "club", bert, cleo)
    await gateway.events.wait("group.invite.accepted", group_id=from_friend, invitee=cleo)
    await eventually(lambda: (cleo, from_stranger) in asked, what="the policy asked about the stranger's group")
    members = {g: {m["aid"] for m in (await friend.client.call("group.get_members", {"group_id": g}))["members"]}
               for g in (from_friend,)}
    assert members[from_friend] == {friend.aid, cleo}  # bert's invitation waits: nobody accepted it
    assert gateway.core.groups.member(from_stranger, cleo) is None and gateway.core.groups.member(from_stranger, bert) is None
    pending = (await stranger.client.call("group.get_members", {"group_id": from_stranger}))["members"]
    assert {m["aid"] for m in pending} == {stranger.aid}


def test_the_environment_turns_accepting_on() -> None:
    assert GatewayAgentConfig.from_env({}).accept_invitations is False
    assert GatewayAgentConfig.from_env({"AUN_GATEWAY_ACCEPT_INVITATIONS": "1"}).accept_invitations is True
