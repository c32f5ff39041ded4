"""``group.thought.put``/``get`` between real AUN clients: encrypted for the group, members only."""

from __future__ import annotations

import json

import pytest
from aun_core import AUNClient
from aun_core.errors import AUNError

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._thoughts import MAX_THOUGHT_BYTES

from .conftest import AgentFactory, Events, unique_name

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


async def _group_with_a_message(gateway: GatewayServer, alice: AUNClient, bob: AUNClient) -> tuple[str, dict[str, str]]:
    """A group of alice and bob, and the context of a message bob posted there."""
    group_id = (await alice.call("group.create", {"group_id": unique_name("minds")}))["group"]["group_id"]
    await alice.call("group.add_member", {"group_id": group_id, "aid": bob.aid})
    await gateway.events.wait("group.state.confirmed", group_id=group_id, state_version=2)
    arrived = Events(alice, "group.message_created")
    sent = await bob.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": "ideas?"}})
    await arrived.next()
    return group_id, {"type": "message", "id": sent["message_id"]}


async def test_a_group_thought_reaches_members_decrypted_and_is_only_ciphertext_here(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    group_id, context = await _group_with_a_message(gateway, alice, bob)
    secret = "bob asks for ideas; propose the cheap one first"
    put = await alice.call("group.thought.put", {"group_id": group_id, "payload": {"type": "text", "text": secret},
                                                 "context": context})
    assert put["status"] == "stored"
    got = await bob.call("group.thought.get", {"group_id": group_id, "sender_aid": alice.aid, "context": context})
    assert got["found"] is True
    [thought] = got["thoughts"]
    assert thought["payload"] == {"type": "text", "text": secret} and thought["encrypted"] is True
    [stored] = gateway.core.thoughts.items()
    assert stored["payload"]["type"] == "e2ee.group_encrypted" and secret not in json.dumps(stored)
    none = await alice.call("group.thought.get", {"group_id": group_id, "sender_aid": bob.aid, "context": context})
    assert none["found"] is False and none["thoughts"] == []


async def test_only_members_put_or_read_group_thoughts_about_the_groups_messages(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob, eve = [await make_agent(unique_name(n)) for n in ("alice", "bob", "eve")]
    group_id, context = await _group_with_a_message(gateway, alice, bob)
    text = {"type": "text", "text": "t"}
    await alice.call("group.thought.put", {"group_id": group_id, "payload": text, "context": context, "encrypt": False})
    for call in (eve.call("group.thought.get", {"group_id": group_id, "sender_aid": alice.aid, "context": context}),
                 eve.call("group.thought.put", {"group_id": group_id, "payload": text, "context": context,
                                                "encrypt": False})):
        with pytest.raises(AUNError) as outsider:
            await call
        assert outsider.value.code == -33006
    elsewhere = {"type": "message", "id": "m-not-in-this-group"}
    with pytest.raises(AUNError) as unknown:
        await alice.call("group.thought.put", {"group_id": group_id, "payload": text, "context": elsewhere,
                                               "encrypt": False})
    assert unknown.value.code == -32004
    # A member added later reads nothing about what was posted before it joined.
    await alice.call("group.add_member", {"group_id": group_id, "aid": eve.aid})
    with pytest.raises(AUNError) as late:
        await eve.call("group.thought.get", {"group_id": group_id, "sender_aid": alice.aid, "context": context})
    assert late.value.code == -32004
    huge = {"type": "text", "text": "x" * MAX_THOUGHT_BYTES}
    with pytest.raises(AUNError) as oversize:
        await alice.call("group.thought.put", {"group_id": group_id, "payload": huge, "context": context,
                                               "encrypt": False})
    assert oversize.value.code == -32602
    assert len(gateway.core.thoughts) == 1
