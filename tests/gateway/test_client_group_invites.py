"""The real AUN client's invitations: ``create_group(members=...)``, the invitee's answers, revoking.

Nobody here is added directly: the owner's client invites, each invitee's client hears of it
(``group.invite_received``), and only accepting makes a member, whom the owner's client then
names in the group's next signed state, so the new member reads encrypted messages from then on.
"""

from __future__ import annotations

from aun_runtime.gateway import GatewayServer

from .conftest import AgentFactory, Events, Owner, refused, unique_name


def _text(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}


async def test_create_group_invites_its_members_and_those_who_accept_read_encrypted_messages(
    gateway: GatewayServer, make_agent: AgentFactory, owner: Owner
) -> None:
    (alice, store), bob, carol = await owner(unique_name("alice")), *[await make_agent(unique_name(n))
                                                                     for n in ("bob", "carol")]
    bob_invites, carol_invites = Events(bob, "group.invite_received"), Events(carol, "group.invite_received")
    created = await alice.create_group({"name": "guild", "members": [bob.aid, carol.aid]}, aid_store=store)
    group_id = created["group"]["group_aid"]
    assert created["invite_errors"] == [] and {i["invitee_aid"] for i in created["invites"]} == {bob.aid, carol.aid}
    # Invited is not a member yet.
    assert {m["aid"] for m in (await alice.call("group.get_members", {"group_id": group_id}))["members"]} == {alice.aid}

    to_bob, to_carol = await bob_invites.next(), await carol_invites.next()
    assert (to_bob["group_id"], to_bob["inviter_aids"], to_bob["status"]) == (group_id, [alice.aid], "pending")
    listed = await bob.group.list_my_invites({})
    assert [item["invite_ids"] for item in listed["items"]] == [to_bob["invite_ids"]]

    accepted = await bob.group.accept_invite({"invite_id": to_bob["invite_id"]})
    assert accepted["status"] == "accepted" and accepted["member"]["aid"] == bob.aid
    rejected = await carol.group.reject_invite({"invite_id": to_carol["invite_id"]})
    assert rejected["status"] == "rejected"
    assert await refused(carol, "group.accept_invite", {"invite_id": to_carol["invite_id"]}) == -33008
    assert (await bob.group.list_my_invites({}))["items"] == [] and (await carol.group.list_my_invites({}))["items"] == []

    # The owner's client hears bob joined and signs a state naming him; he reads what follows.
    await gateway.events.wait("group.state.confirmed", group_id=group_id, aids=tuple(sorted([alice.aid, bob.aid])))
    at_bob = Events(bob, "group.message_created")
    await alice.call("group.send", {"group_id": group_id, "payload": _text("welcome, bob")})
    got = await at_bob.next()
    assert (got["from"], got["payload"]["text"], got["encrypted"]) == (alice.aid, "welcome, bob", True)
    assert await refused(carol, "group.send", {"group_id": group_id, "payload": _text("me too?")}) == -33006


async def test_an_invitation_is_revoked_by_its_sender_only_and_reaches_the_invitee_once(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob, dave = [await make_agent(unique_name(n)) for n in ("alice", "bob", "dave")]
    group_id = (await alice.call("group.create", {"group_id": unique_name("club")}))["group"]["group_id"]
    heard = Events(dave, "group.invite_received")
    first = await alice.group.invite_member({"group_id": group_id, "invitee_aid": dave.aid})
    again = await alice.group.invite_member({"group_id": group_id, "invitee_aid": dave.aid})
    assert again["invite_id"] == first["invite_id"]  # a retried call answers the first invitation
    assert (await heard.next())["invite_ids"] == [first["invite_id"]]
    assert await refused(bob, "group.invite_member", {"group_id": group_id, "invitee_aid": dave.aid}) == -33006
    await alice.call("group.add_member", {"group_id": group_id, "aid": bob.aid})
    # A private group: only the owner and admins invite.
    assert await refused(bob, "group.invite_member", {"group_id": group_id, "invitee_aid": dave.aid}) == -33007
    assert await refused(alice, "group.invite_member", {"group_id": group_id, "invitee_aid": bob.aid}) == -33005
    assert await refused(bob, "group.revoke_invite", {"invite_id": first["invite_id"]}) == -32004

    revoked = await alice.group.revoke_invite({"invite_id": first["invite_id"]})
    assert revoked["status"] == "revoked"
    assert (await dave.group.list_my_invites({}))["items"] == []
    assert await refused(dave, "group.accept_invite", {"invite_id": first["invite_id"]}) == -33008
    assert gateway.core.groups.member(group_id, dave.aid) is None
