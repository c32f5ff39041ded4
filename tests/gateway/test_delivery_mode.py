"""``delivery_mode`` on the gateway: fanout, queue with round robin and sender affinity, conflicts,
and queue members that go away mid-stream — with the real AUN client (default options plus the
``delivery_mode`` connect option) and, for exact wire values, a raw wire client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aun_core import AUNClient
from aun_core.errors import AUNError

from aun_runtime.gateway import ErrorCode, GatewayLimits, GatewayServer, _queue

from .conftest import (
    AgentFactory,
    Events,
    MemberFactory,
    RawConnection,
    RawIdentity,
    raw_register,
    unique_name,
)

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")

ROUND_ROBIN = {"mode": "queue", "routing": "round_robin"}
AFFINITY = {"mode": "queue", "routing": "sender_affinity"}

def connection_of(gateway: GatewayServer, aid: str, device_id: str) -> Any:
    (session,) = [s for s in gateway.core.sessions_of(aid) if s.device_id == device_id]
    return session


async def send_texts(sender: AUNClient, to: str, texts: list[str]) -> list[dict[str, Any]]:
    return [await sender.call("message.send", {"to": to, "payload": {"type": "text", "text": t}}) for t in texts]


async def bob_with_members(make_agent: AgentFactory, make_member: MemberFactory, mode: dict[str, Any],
                           **handlers: Any) -> tuple[AUNClient, AUNClient]:
    name = unique_name("bob")
    await make_agent(name, connect=False)  # registers the AID in member 1's directory
    first = await make_member(name, 1, mode, on_message=handlers.get("first"))
    second = await make_member(name, 2, mode, on_message=handlers.get("second"))
    assert first.device_id != second.device_id
    return first, second


# -- round robin, affinity ---------------------------------------------------------------------


async def test_round_robin_spreads_encrypted_messages_over_two_members_none_twice(
    gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory
) -> None:
    first, second = await bob_with_members(make_agent, make_member, ROUND_ROBIN)
    inboxes = Events(first, "message.received"), Events(second, "message.received")
    alice = await make_agent(unique_name("alice"))  # after both members published their prekeys
    texts = [f"job {i}" for i in range(8)]
    sent = await send_texts(alice, first.aid, texts)
    assert {s["status"] for s in sent} == {"delivered"}
    assigned = [await gateway.events.wait("message.assigned", message_id=s["message_id"]) for s in sent]
    devices = [a.fields["device_id"] for a in assigned]
    # In turn: every other message to each member.
    assert devices[0::2] == [devices[0]] * 4 and devices[1::2] == [devices[1]] * 4 and devices[0] != devices[1]
    got = [await inboxes[0].take(4), await inboxes[1].take(4)]
    by_device = {first.device_id: got[0], second.device_id: got[1]}
    for device, messages in by_device.items():
        expected = [t for t, d in zip(texts, devices, strict=True) if d == device]
        assert [m["payload"]["text"] for m in messages] == expected  # each its share, in order
        assert all(m["encrypted"] is True for m in messages)  # both devices hold keys for every message
    assert inboxes[0].drain() == [] and inboxes[1].drain() == []


async def test_round_robin_pushes_carry_each_members_own_chain(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    members = [await queue_connect(gateway, bob, f"bob-{i}", ROUND_ROBIN) for i in (1, 2)]
    seqs = []
    for i in range(6):
        answer = await sender.call("message.send", {"to": bob.aid, "payload": {"type": "text", "text": str(i)}})
        seqs.append(answer["result"]["seq"])
    pushes = [[await next_push(m) for _ in range(3)] for m in members]
    for mine, push in zip((seqs[0::2], seqs[1::2]), pushes, strict=True):
        assert [p["seq"] for p in push] == mine
        # Each push names the previous message of the sender in this member's share, not in the inbox.
        assert [p["prev_peer_seq"] for p in push] == [0, *mine[:-1]]
        assert [p["inline_message"]["prev_peer_seq"] for p in push] == [0, *mine[:-1]]
    # A pull shows a member its share only, with the coverage proof over its share.
    page = (await members[0].call("message.v2.pull", {"sender_aid": alice.aid, "after_seq": 0}))["result"]
    assert [m["seq"] for m in page["messages"]] == seqs[0::2]
    assert page["covered_through_seq"] == page["head_seq"] == seqs[-1] and page["has_more"] is False
    peers = (await members[1].call("message.peers", {"filter": "pending"}))["result"]["peers"]
    assert peers == [{"sender_aid": alice.aid, "head_seq": seqs[-1], "server_ack_seq": 0, "next_pending_seq": seqs[1]}]


async def test_an_encrypted_message_goes_only_to_a_member_it_is_wrapped_for(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    await queue_connect(gateway, bob, "bob-1", ROUND_ROBIN)
    await queue_connect(gateway, bob, "bob-2", ROUND_ROBIN)
    # A sender that learnt bob's devices before bob-2 was there wraps its messages for bob-1 only:
    # bob-2 could not decrypt them, so they are not its turn.
    sealed = {"type": "e2ee.p2p_encrypted", "ciphertext": "...", "recipients": [[bob.aid, "bob-1", "peer"]]}
    for _ in range(4):
        answer = await sender.call("message.send", {"to": bob.aid, "payload": sealed})
        (assigned,) = gateway.events.find("message.assigned", message_id=answer["result"]["message_id"])
        assert assigned.fields["device_id"] == "bob-1"
    plain = [(await sender.call("message.send", {"to": bob.aid, "payload": {"text": str(i)}}))["result"] for i in range(2)]
    turns = {gateway.events.find("message.assigned", message_id=p["message_id"])[0].fields["device_id"] for p in plain}
    assert turns == {"bob-1", "bob-2"}  # plaintext still goes in turn


async def test_sender_affinity_keeps_each_senders_messages_on_one_member_in_order(
    gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory
) -> None:
    first, second = await bob_with_members(make_agent, make_member, AFFINITY)
    inboxes = {first.device_id: Events(first, "message.received"), second.device_id: Events(second, "message.received")}
    alice, carol = await make_agent(unique_name("alice")), await make_agent(unique_name("carol"))
    sent: dict[str, list[str]] = {alice.aid: [], carol.aid: []}
    for i in range(5):  # interleaved, so round robin would have split each sender's messages
        for sender in (alice, carol):
            text = f"{sender.aid} #{i}"
            await sender.call("message.send", {"to": first.aid, "payload": {"type": "text", "text": text}})
            sent[sender.aid].append(text)
    homes = {}
    for sender_aid in sent:
        devices = {e.fields["device_id"] for e in gateway.events.find("message.assigned", sender=sender_aid)}
        assert len(devices) == 1  # one member for all of this sender's messages
        homes[sender_aid] = devices.pop()
    assert homes[alice.aid] != homes[carol.aid]  # and the senders were spread over the members
    for sender_aid, texts in sent.items():
        received = await inboxes[homes[sender_aid]].take(5)
        assert [m["payload"]["text"] for m in received] == texts and {m["from"] for m in received} == {sender_aid}


async def test_sender_affinity_moves_a_sender_when_its_member_goes(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    one, two = [await queue_connect(gateway, bob, f"bob-{i}", AFFINITY) for i in (1, 2)]
    first = (await sender.call("message.send", {"to": bob.aid, "payload": {"text": "a"}}))["result"]
    assert (await next_push(one))["seq"] == first["seq"]
    await one.call("message.v2.ack", {"sender_aid": alice.aid, "up_to_seq": first["seq"]})
    await one.close()
    await gateway.events.wait("disconnected", aid=bob.aid, connection_id=session_id(gateway, first["message_id"]))
    later = (await sender.call("message.send", {"to": bob.aid, "payload": {"text": "b"}}))["result"]
    assert later["status"] == "delivered"
    push = await next_push(two)
    assert push["seq"] == later["seq"] and push["prev_peer_seq"] == 0  # new to this member: its chain starts
    assert gateway.events.find("message.reissued", receiver=bob.aid) == []  # the first was acknowledged


async def test_sender_affinities_are_bounded_the_least_recent_is_forgotten(tmp_path: Path) -> None:
    limits = GatewayLimits(queue_affinity_senders=1)
    async with GatewayServer("127.0.0.1", port=0, data_dir=tmp_path / "bounded", limits=limits) as gateway:
        bob = await raw_register(gateway, unique_name("bob"))
        senders = [await (await raw_register(gateway, unique_name(n))).connect(gateway, device_id=f"{n}-device")
                   for n in ("alice", "carol")]
        for i in (1, 2, 3):
            await queue_connect(gateway, bob, f"bob-{i}", AFFINITY)

        async def member_of(sender: RawConnection) -> str:
            answer = await sender.call("message.send", {"to": bob.aid, "payload": {"text": "x"}})
            (assigned,) = gateway.events.find("message.assigned", message_id=answer["result"]["message_id"])
            return str(assigned.fields["device_id"])

        alice, carol = senders
        assert [await member_of(alice), await member_of(alice)] == ["bob-1", "bob-1"]  # kept
        assert await member_of(carol) == "bob-2"  # the one affinity kept is now carol's
        assert await member_of(alice) == "bob-3"  # alice was forgotten: the next member in turn


# -- conflicts and bad values ------------------------------------------------------------------


async def test_a_connection_with_another_delivery_mode_is_refused_with_delivery_mode_conflict(
    gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory
) -> None:
    name = unique_name("bob")
    await make_agent(name, connect=False)
    fanout = await make_member(name, 1, None)  # the client's default: fanout
    queued = await make_member(name, 2, ROUND_ROBIN, connect=False)
    with pytest.raises(AUNError) as caught:
        await queued.connect({"auto_reconnect": False, "delivery_mode": ROUND_ROBIN})
    assert caught.value.code == ErrorCode.CONNECT_CONFLICT and "delivery_mode_conflict" in str(caught.value)
    assert caught.value.data["reason"] == "delivery_mode_conflict"
    assert caught.value.data["online"]["mode"] == "fanout" and caught.value.data["declared"]["mode"] == "queue"
    assert [s.device_id for s in gateway.core.sessions_of(fanout.aid)] == [fanout.device_id]
    # Once the fanout connection is gone, the queue member gets in (the conflict was retryable).
    assert caught.value.retryable is True
    aid = fanout.aid
    await fanout.close()
    await gateway.events.wait("disconnected", aid=aid)
    await queued.connect({"auto_reconnect": False, "delivery_mode": ROUND_ROBIN})
    assert [s.delivery_mode.routing for s in gateway.core.sessions_of(aid)] == ["round_robin"]


async def test_routing_and_affinity_time_must_agree_too(gateway: GatewayServer) -> None:
    bob = await raw_register(gateway, unique_name("bob"))
    await queue_connect(gateway, bob, "bob-1", {**AFFINITY, "affinity_ttl_ms": 60_000})
    for other in (ROUND_ROBIN, AFFINITY, {"mode": "fanout"}):
        error = await refused_connect(gateway, bob, "bob-2", other)
        assert error["code"] == ErrorCode.CONNECT_CONFLICT and error["data"]["reason"] == "delivery_mode_conflict"
        assert error["data"]["online"] == {"mode": "queue", "routing": "sender_affinity", "affinity_ttl_ms": 60_000}
    await queue_connect(gateway, bob, "bob-2", {**AFFINITY, "affinity_ttl_ms": 60_000})


async def test_two_queue_members_on_one_device_and_slot_are_refused_with_slot_conflict(gateway: GatewayServer) -> None:
    bob = await raw_register(gateway, unique_name("bob"))
    await queue_connect(gateway, bob, "bob-1", ROUND_ROBIN)
    error = await refused_connect(gateway, bob, "bob-1", ROUND_ROBIN)
    assert error["code"] == ErrorCode.CONNECT_CONFLICT and error["data"]["reason"] == "slot_conflict"
    await queue_connect(gateway, bob, "bob-1", ROUND_ROBIN, slot_id="second")  # another slot is another member


@pytest.mark.parametrize(("value", "field"), [
    ({"mode": "broadcast"}, "delivery_mode.mode"),
    ({"mode": "queue", "routing": "random"}, "delivery_mode.routing"),
    ({"mode": "queue", "routing": "sender_affinity", "affinity_ttl_ms": -1}, "delivery_mode.affinity_ttl_ms"),
    ({"mode": "queue", "routing": "sender_affinity", "affinity_ttl_ms": "5"}, "delivery_mode.affinity_ttl_ms"),
    ({"mode": 7}, "delivery_mode.mode"),
    ([1, 2], "delivery_mode"),
])
async def test_a_bad_delivery_mode_is_refused_naming_the_field(gateway: GatewayServer, value: Any, field: str) -> None:
    bob = await raw_register(gateway, unique_name("bob"))
    error = await refused_connect(gateway, bob, "bob-1", value)
    assert error["code"] == ErrorCode.INVALID_PARAMS and error["data"]["field"] == field


# -- members that go away ----------------------------------------------------------------------


async def test_a_member_killed_mid_stream_loses_nothing_the_other_gets_the_rest(
    gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory
) -> None:
    stuck = asyncio.Event()

    async def never_done(_message: dict[str, Any]) -> None:  # a member that hangs on its first message
        await stuck.wait()

    first, second = await bob_with_members(make_agent, make_member, ROUND_ROBIN, first=never_done)
    inbox = Events(second, "message.received")
    alice = await make_agent(unique_name("alice"))
    texts = [f"job {i}" for i in range(10)]
    sent = await send_texts(alice, first.aid, texts)
    on_first = [a.fields for a in gateway.events.find("message.assigned", receiver=first.aid, device_id=first.device_id)]
    assert len(on_first) == 5
    # The hung member's connection drops (no close handshake), with its five messages unacknowledged.
    connection_of(gateway, first.aid, first.device_id).transport.abort()
    moved = [await gateway.events.wait("message.reissued", receiver=first.aid, from_seq=a["seq"]) for a in on_first]
    assert {m.fields["device_id"] for m in moved} == {second.device_id}
    received = await inbox.take(10)
    assert sorted(m["payload"]["text"] for m in received) == sorted(texts)  # all ten, at the other member
    assert {m["message_id"] for m in received} == {s["message_id"] for s in sent}  # a copy keeps its message_id
    stuck.set()


async def test_a_member_that_connects_takes_over_the_open_messages_of_one_that_is_gone(
    gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory
) -> None:
    stuck = asyncio.Event()

    async def never_done(_message: dict[str, Any]) -> None:
        await stuck.wait()

    name = unique_name("bob")
    await make_agent(name, connect=False)
    first = await make_member(name, 1, ROUND_ROBIN, on_message=never_done)
    second = await make_member(name, 2, ROUND_ROBIN, connect=False)  # its prekey is not published yet
    inbox = Events(second, "message.received")
    alice = await make_agent(unique_name("alice"))
    texts = [f"job {i}" for i in range(4)]
    sent = [await alice.call("message.send", {"to": first.aid, "payload": {"type": "text", "text": t}, "encrypt": False})
            for t in texts]
    assert {s["status"] for s in sent} == {"delivered"}
    connection_of(gateway, first.aid, first.device_id).transport.abort()
    await gateway.events.wait("disconnected", aid=first.aid)
    assert gateway.events.find("message.reissued", receiver=first.aid) == []  # nobody to take them yet
    await second.connect({"auto_reconnect": True, "delivery_mode": ROUND_ROBIN})
    received = await inbox.take(4)
    assert [m["payload"]["text"] for m in received] == texts
    assert len(gateway.events.find("message.reissued", receiver=first.aid, device_id=second.device_id)) == 4
    stuck.set()


async def test_a_member_that_comes_back_gets_its_own_messages_not_copies(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    member = await queue_connect(gateway, bob, "bob-1", ROUND_ROBIN)
    sent = [(await sender.call("message.send", {"to": bob.aid, "payload": {"text": str(i)}}))["result"] for i in range(3)]
    await member.close()
    await gateway.events.wait("disconnected", aid=bob.aid)
    again = await queue_connect(gateway, bob, "bob-1", ROUND_ROBIN)
    page = (await again.call("message.v2.pull", {"sender_aid": alice.aid, "after_seq": 0}))["result"]
    assert [m["seq"] for m in page["messages"]] == [s["seq"] for s in sent]
    assert gateway.events.find("message.reissued", receiver=bob.aid) == []


async def test_messages_stored_while_no_member_is_online_go_to_the_member_that_pulls_them(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    sent = [(await sender.call("message.send", {"to": bob.aid, "payload": {"text": str(i)}}))["result"] for i in range(3)]
    assert {s["status"] for s in sent} == {"stored"}
    one, two = [await queue_connect(gateway, bob, f"bob-{i}", ROUND_ROBIN) for i in (1, 2)]
    listed = [(await m.call("message.peers", {"filter": "pending"}))["result"]["peers"] for m in (one, two)]
    assert listed[0] == listed[1] and listed[0][0]["next_pending_seq"] == sent[0]["seq"]  # unclaimed: both see them
    page = (await one.call("message.v2.pull", {"sender_aid": alice.aid, "after_seq": 0}))["result"]
    assert [m["seq"] for m in page["messages"]] == [s["seq"] for s in sent]
    other = (await two.call("message.v2.pull", {"sender_aid": alice.aid, "after_seq": 0}))["result"]
    assert other["messages"] == [] and other["covered_through_seq"] == other["head_seq"]  # claimed by the first
    assert (await two.call("message.peers", {"filter": "pending"}))["result"]["peers"] == []


async def test_a_large_backlog_moves_in_batches_with_one_push_per_batch(
    gateway: GatewayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_queue, "TAKEOVER_BATCH", 10)
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    leaving = await queue_connect(gateway, bob, "bob-1", AFFINITY)
    sent = [(await sender.call("message.send", {"to": bob.aid, "payload": {"text": str(i)}}))["result"] for i in range(25)]
    staying = await queue_connect(gateway, bob, "bob-2", AFFINITY)  # alice stays with bob-1 meanwhile
    await leaving.close()  # none of the 25 acknowledged
    for original in sent:
        await gateway.events.wait("message.reissued", receiver=bob.aid, from_seq=original["seq"])
    pushes = []
    while len(pushes) < 3:
        pushes.append(await next_push(staying))
    copies = [e.fields["seq"] for e in gateway.events.find("message.reissued", receiver=bob.aid)]
    # Three batches (10, 10, 5), the newest copy of each pushed, its chain pointing at the one before.
    assert [p["seq"] for p in pushes] == [copies[9], copies[19], copies[24]]
    assert [p["prev_peer_seq"] for p in pushes] == [copies[8], copies[18], copies[23]]
    page = (await staying.call("message.v2.pull", {"sender_aid": alice.aid, "after_seq": 0, "limit": 200}))["result"]
    assert [m["seq"] for m in page["messages"]] == copies
    assert [m["legacy_v1"]["payload"]["text"] for m in page["messages"]] == [str(i) for i in range(25)]
    assert [m["message_id"] for m in page["messages"]] == [s["message_id"] for s in sent]
    # The copies are the taker's; the originals left every view, so bob-1 gets nothing back.
    back = await queue_connect(gateway, bob, "bob-1", AFFINITY)
    again = (await back.call("message.v2.pull", {"sender_aid": alice.aid, "after_seq": 0}))["result"]
    assert again["messages"] == []
    # And a retried send still finds its first copy.
    retry = await sender.call("message.send", {"to": bob.aid, "message_id": sent[0]["message_id"], "payload": {"text": "0"}})
    assert retry["result"]["status"] == "duplicate" and retry["result"]["seq"] == sent[0]["seq"]


async def test_open_messages_survive_a_gateway_restart_and_go_to_the_member_that_connects(tmp_path: Path) -> None:
    data = tmp_path / "restarted"
    no_grace = GatewayLimits(queue_rejoin_grace=0)  # with one, see test_queue_restart.py
    async with GatewayServer("127.0.0.1", port=0, data_dir=data, limits=no_grace) as gateway:
        alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
        sender = await alice.connect(gateway, device_id="alice-device")
        await queue_connect(gateway, bob, "bob-1", ROUND_ROBIN)
        sent = [(await sender.call("message.send", {"to": bob.aid, "payload": {"text": str(i)}}))["result"]
                for i in range(3)]
        assert {s["status"] for s in sent} == {"delivered"}  # pushed to bob-1, never acknowledged
    async with GatewayServer("127.0.0.1", port=0, data_dir=data, limits=no_grace) as gateway:
        other = await queue_connect(gateway, bob, "bob-2", ROUND_ROBIN)  # before bob-1 is back
        peers = (await other.call("message.peers", {"filter": "pending"}))["result"]["peers"]
        page = (await other.call("message.v2.pull", {"sender_aid": alice.aid, "after_seq": 0}))["result"]
        assert [m["legacy_v1"]["payload"]["text"] for m in page["messages"]] == ["0", "1", "2"]
        assert [m["seq"] for m in page["messages"]] == [sent[-1]["seq"] + i for i in (1, 2, 3)]  # copies
        assert peers[0]["next_pending_seq"] == sent[-1]["seq"] + 1


async def test_group_messages_reach_every_queue_member(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    owner = await alice.connect(gateway, device_id="alice-device")
    members = [await queue_connect(gateway, bob, f"bob-{i}", ROUND_ROBIN) for i in (1, 2)]
    group = (await owner.call("group.create", {"group_id": unique_name("crew")}))["result"]["group"]["group_id"]
    await owner.call("group.add_member", {"group_id": group, "aid": bob.aid})
    posted = (await owner.call("group.send", {"group_id": group, "payload": {"type": "text", "text": "all hands"}}))
    assert "result" in posted, posted
    for conn in members:  # AUN group messages are always fanout, whatever the AID's delivery mode
        while True:
            frame = conn.pushes.pop(0) if conn.pushes else json.loads(await asyncio.wait_for(conn.ws.recv(), 10))
            if frame.get("method") == "event/group.message_created":
                params = frame["params"]
                assert (params["group_id"], params["message_id"]) == (group, posted["result"]["message"]["message_id"])
                break


# -- helpers -----------------------------------------------------------------------------------


def connect_params(conn: RawConnection, who: RawIdentity, device_id: str, mode: Any, slot_id: str) -> dict[str, Any]:
    return {
        "nonce": conn.challenge["params"]["nonce"], "auth": {"method": "kite_token", "token": who.access_token},
        "device": {"id": device_id, "type": "sdk"}, "client": {"slot_id": slot_id}, "delivery_mode": mode,
    }


async def queue_connect(gateway: GatewayServer, who: RawIdentity, device_id: str, mode: Any,
                        slot_id: str = "default") -> RawConnection:
    conn = await RawConnection.open(gateway)
    answer = await conn.call("auth.connect", connect_params(conn, who, device_id, mode, slot_id))
    assert answer.get("result", {}).get("status") == "ok", answer
    return conn


async def refused_connect(gateway: GatewayServer, who: RawIdentity, device_id: str, mode: Any) -> dict[str, Any]:
    conn = await RawConnection.open(gateway)
    answer = await conn.call("auth.connect", connect_params(conn, who, device_id, mode, "default"))
    await conn.close()
    assert "error" in answer, answer
    return dict(answer["error"])


async def next_push(conn: RawConnection) -> dict[str, Any]:
    """The next ``event/message.received`` push on a raw connection."""
    while True:
        frame = conn.pushes.pop(0) if conn.pushes else json.loads(await asyncio.wait_for(conn.ws.recv(), 10))
        if frame.get("method") == "event/message.received":
            return dict(frame["params"])


def session_id(gateway: GatewayServer, message_id: str) -> str:
    (assigned,) = gateway.events.find("message.assigned", message_id=message_id)
    return str(assigned.fields["connection_id"])


async def send(sender: RawConnection, to: str, text: str, **extra: Any) -> dict[str, Any]:
    answer = await sender.call("message.send", {"to": to, "payload": {"text": text}, **extra})
    assert "result" in answer, answer
    return dict(answer["result"])


async def pull(conn: RawConnection, sender_aid: str, after: int = 0) -> dict[str, Any]:
    answer = await conn.call("message.v2.pull", {"sender_aid": sender_aid, "after_seq": after, "limit": 200})
    assert "result" in answer, answer
    return dict(answer["result"])


def owner_of(gateway: GatewayServer, message_id: str) -> str:
    (assigned,) = gateway.events.find("message.assigned", message_id=message_id)
    return str(assigned.fields["device_id"])
