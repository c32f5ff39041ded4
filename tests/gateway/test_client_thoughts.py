"""``message.thought.put``/``get`` between two real AUN clients: encrypted, bounded, for the two parties only."""

from __future__ import annotations

import json

import pytest
from aun_core.errors import AUNError

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._thoughts import MAX_THOUGHT_BYTES, ThoughtStore

from .conftest import AgentFactory, Events, unique_name

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


async def test_a_thought_reaches_the_other_party_decrypted_and_is_only_ciphertext_here(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    inbox = Events(bob, "message.received")
    sent = await alice.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": "hello"}})
    await inbox.next()
    context = {"type": "message", "id": sent["message_id"]}
    secret = "alice greets first, bob should answer"
    put = await alice.call("message.thought.put", {"to": bob.aid, "payload": {"type": "text", "text": secret},
                                                   "context": context})
    assert put["status"] == "stored"
    got = await bob.call("message.thought.get", {"sender_aid": alice.aid, "context": context})
    assert got["found"] is True
    [thought] = got["thoughts"]
    assert thought["payload"] == {"type": "text", "text": secret} and thought["encrypted"] is True
    [stored] = gateway.core.thoughts.items()
    assert stored["payload"]["type"] == "e2ee.p2p_encrypted"
    assert secret not in json.dumps(stored)
    # The sender of the message may not read thoughts not meant for it: bob put none.
    mine = await alice.call("message.thought.get", {"sender_aid": bob.aid, "context": context})
    assert mine["found"] is False and mine["thoughts"] == []


async def test_only_the_two_parties_of_a_message_put_or_get_its_thoughts(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    eve = await make_agent(unique_name("eve"))
    inbox = Events(bob, "message.received")
    sent = await alice.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": "hello"}})
    await inbox.next()
    context = {"type": "message", "id": sent["message_id"]}
    await alice.call("message.thought.put", {"to": bob.aid, "payload": {"type": "text", "text": "t"}, "context": context})
    with pytest.raises(AUNError) as refused:
        await eve.call("message.thought.get", {"sender_aid": alice.aid, "context": context})
    assert refused.value.code == -32004
    # Nor may a thought be put about a message its sender was not part of.
    with pytest.raises(AUNError) as refused:
        await eve.call("message.thought.put", {"to": bob.aid, "payload": {"type": "text", "text": "t"}, "context": context})
    assert refused.value.code == -32004
    assert len(gateway.core.thoughts) == 1


async def test_an_oversize_thought_is_refused_and_nothing_is_kept(gateway: GatewayServer, make_agent: AgentFactory) -> None:
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    inbox = Events(bob, "message.received")
    sent = await alice.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": "hello"}})
    await inbox.next()
    big = {"type": "text", "text": "x" * MAX_THOUGHT_BYTES}
    with pytest.raises(AUNError) as refused:
        await alice.call("message.thought.put", {"to": bob.aid, "payload": big,
                                                 "context": {"type": "message", "id": sent["message_id"]}})
    assert refused.value.code == -32602
    assert len(gateway.core.thoughts) == 0


def test_the_bounds_drop_the_oldest_per_sender_and_in_all() -> None:
    store = ThoughtStore(per_aid=2, total=3)
    for i in range(3):
        store.put("a.x", "b.x", f"m{i}", {"n": f"a{i}"})
    assert [t["n"] for t in store.items()] == ["a1", "a2"]  # a's oldest went at a's third
    assert store.get("a.x", "b.x", "m0") == []
    store.put("c.x", "b.x", "m9", {"n": "c0"})
    store.put("c.x", "b.x", "m9", {"n": "c1"})
    assert [t["n"] for t in store.items()] == ["a2", "c0", "c1"]  # the oldest of anyone's went
    assert [t["n"] for t in store.get("c.x", "b.x", "m9")] == ["c0", "c1"]


async def test_past_the_bound_the_oldest_thought_is_gone_from_the_wire(gateway: GatewayServer, make_agent: AgentFactory) -> None:
    gateway.core.thoughts = ThoughtStore(per_aid=2, total=10)
    alice, bob = await make_agent(unique_name("alice")), await make_agent(unique_name("bob"))
    inbox = Events(bob, "message.received")
    sent = await alice.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": "hello"}})
    await inbox.next()
    context = {"type": "message", "id": sent["message_id"]}
    for i in range(3):
        await alice.call("message.thought.put", {"to": bob.aid, "payload": {"type": "text", "text": f"t{i}"},
                                                 "context": context})
    got = await bob.call("message.thought.get", {"sender_aid": alice.aid, "context": context})
    assert [t["payload"]["text"] for t in got["thoughts"]] == ["t1", "t2"]
