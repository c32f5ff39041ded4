"""A fanout connection of an AID that was served in queue mode reads each message once: the copies
re-issued for queue members are left out of what it pulls, lists and is pushed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aun_runtime.gateway import GatewayServer

from .conftest import AgentFactory, Events, MemberFactory, raw_register, unique_name
from .test_delivery_mode import ROUND_ROBIN, connection_of, next_push, pull, queue_connect, send

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


# -- 2. a fanout reader after the queue members left --------------------------------------------


async def test_a_fanout_reader_after_the_queue_members_sees_each_message_once(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    one, two = [await queue_connect(gateway, bob, f"bob-{i}", ROUND_ROBIN) for i in (1, 2)]
    sent = [await send(sender, bob.aid, str(i)) for i in range(4)]
    await one.close()  # its two messages, unacknowledged, are re-issued to bob-2
    for original in sent[0::2]:
        await gateway.events.wait("message.reissued", receiver=bob.aid, from_seq=original["seq"])
    head = (await pull(two, alice.aid))["head_seq"]
    await two.call("message.v2.ack", {"sender_aid": alice.aid, "up_to_seq": head})
    await two.close()
    await gateway.events.wait("disconnected", aid=bob.aid)
    while gateway.core.sessions_of(bob.aid):
        await gateway.events.wait("disconnected", aid=bob.aid)
    reader = await bob.connect(gateway, device_id="bob-laptop")  # fanout, the default
    page = await pull(reader, alice.aid)
    assert [m["seq"] for m in page["messages"]] == [s["seq"] for s in sent]  # where they were sent
    assert [m["message_id"] for m in page["messages"]] == [s["message_id"] for s in sent]  # once each
    assert [m["prev_peer_seq"] for m in page["messages"]] == [0, *[s["seq"] for s in sent[:-1]]]
    assert page["has_more"] is False and page["covered_through_seq"] == page["head_seq"]
    (peer,) = (await reader.call("message.peers", {"filter": "pending"}))["result"]["peers"]
    assert peer["head_seq"] == sent[-1]["seq"] and peer["next_pending_seq"] == sent[0]["seq"]
    await reader.call("message.v2.ack", {"sender_aid": alice.aid, "up_to_seq": sent[-1]["seq"]})
    assert (await reader.call("message.peers", {"filter": "pending"}))["result"]["peers"] == []
    # A new message's chain points at the last message the reader has, not at a copy.
    new = await send(sender, bob.aid, "4")
    push = await next_push(reader)
    assert push["seq"] == new["seq"] and push["prev_peer_seq"] == push["inline_message"]["prev_peer_seq"] == sent[-1]["seq"]


async def test_the_real_client_reading_in_fanout_after_queue_members_gets_each_message_once(
    gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory
) -> None:
    stuck = asyncio.Event()
    try:
        await fanout_after_queue_members(gateway, make_agent, make_member, stuck)
    finally:
        stuck.set()  # else closing the hung member's client waits for its handler forever


async def fanout_after_queue_members(gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory,
                                     stuck: asyncio.Event) -> None:
    async def never_done(_message: dict[str, Any]) -> None:
        await stuck.wait()

    name = unique_name("bob")
    await make_agent(name, connect=False)
    first = await make_member(name, 1, ROUND_ROBIN, on_message=never_done)
    second = await make_member(name, 2, ROUND_ROBIN)
    bob = first.aid  # a closed client forgets its AID
    taken = Events(second, "message.received")
    alice = await make_agent(unique_name("alice"))
    texts = [f"job {i}" for i in range(6)]
    sent = [await alice.call("message.send", {"to": bob, "payload": {"type": "text", "text": t}, "encrypt": False})
            for t in texts]
    connection_of(gateway, bob, first.device_id).transport.abort()
    assert len(await taken.take(6)) == 6
    copies = [await gateway.events.wait("message.reissued", receiver=bob, from_seq=s["seq"]) for s in sent[0::2]]
    top = max(c.fields["seq"] for c in copies)
    await gateway.events.wait("message.acked", receiver=bob, device_id=second.device_id, ack_seq=top)
    # Both members leave for good. The first one's client, cut off above, reconnects by itself
    # (auto_reconnect) whenever it gets round to it: left connected, it could come back in queue mode
    # just before the fanout reader, which the gateway then refuses (one delivery mode per AID).
    stuck.set()  # its handlers end, so that closing it does not wait for them
    await first.close()
    await second.close()
    while gateway.core.sessions_of(bob):
        await gateway.events.wait("disconnected", aid=bob)
    reader = await make_member(name, 3, None, connect=False)  # a new device, fanout (the default)
    read = Events(reader, "message.received")
    await reader.connect({"auto_reconnect": True})
    received = await read.take(6)
    assert sorted(m["payload"]["text"] for m in received) == texts
    assert sorted(m["message_id"] for m in received) == sorted(s["message_id"] for s in sent)
    await alice.call("message.send", {"to": bob, "payload": {"type": "text", "text": "last"}, "encrypt": False})
    assert (await read.next())["payload"]["text"] == "last"  # nothing else came before it
    assert read.drain() == []


