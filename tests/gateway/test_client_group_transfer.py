"""The real AUN client handing a group to another member: the owner asks, the new owner's client
completes by itself with a new group key, and the gateway certifies it."""

from __future__ import annotations

import time

import pytest
from aun_core.errors import AUNError

from aun_runtime.gateway import GatewayServer

from .conftest import AgentFactory, Events, Owner, unique_name


async def test_the_new_owners_client_completes_a_transfer_with_a_new_group_key(
    gateway: GatewayServer, make_agent: AgentFactory, owner: Owner
) -> None:
    (alice, store), bob = await owner(unique_name("alice")), await make_agent(unique_name("bob"))
    group_id = (await alice.create_group({"name": "handover"}, aid_store=store))["group"]["group_aid"]
    await alice.call("group.add_member", {"group_id": group_id, "aid": bob.aid})
    old_cert = gateway.core.identities.current(group_id)
    assert old_cert is not None
    changes = Events(alice, "group.changed")
    asked_at = time.time()

    started = await alice.group.transfer_owner({"group_id": group_id, "new_owner": bob.aid}, aid_store=store)
    assert (started["status"], started["new_owner"], started["complete_rpc"]) == (
        "pending_rekey", bob.aid, "group.complete_transfer")
    # bob's client hears of the pending transfer and completes it on its own.
    await gateway.events.wait("group.owner.transferred", group_id=group_id, new_owner=bob.aid)
    while (await changes.next())["action"] != "owner_transferred":
        pass
    info = await bob.call("group.get_info", {"group_id": group_id})
    assert (info["group"]["owner_aid"], info["member"]["role"]) == (bob.aid, "owner")
    roles = {m["aid"]: m["role"] for m in (await alice.call("group.get_members", {"group_id": group_id}))["members"]}
    assert roles == {alice.aid: "admin", bob.aid: "owner"}
    new_cert = gateway.core.identities.current(group_id)
    assert new_cert is not None and new_cert.serial_hex != old_cert.serial_hex
    assert new_cert.public_key.public_numbers() != old_cert.public_key.public_numbers()
    # ... and published the group's card again, as its owner, signed with the new key.
    await gateway.events.wait("agent_md.published", aid=group_id, after=asked_at)

    # alice is an admin now: she can no longer transfer or dissolve.
    with pytest.raises(AUNError) as refused:
        await alice.call("group.dissolve", {"group_id": group_id})
    assert refused.value.code == -33007
    assert (await bob.group.dissolve({"group_id": group_id}))["status"] == "dissolved"
