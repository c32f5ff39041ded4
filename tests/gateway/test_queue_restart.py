"""Queue delivery across a gateway restart: each member that was connected keeps its unacknowledged
messages for a grace period (``queue_rejoin_grace``), a sender's messages under ``sender_affinity``
wait for its member in order, and only a member not back by the end of it has them re-issued; a
take-over under way keeps a sender's order the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aun_runtime.gateway import GatewayLimits, GatewayServer, _queue

from .conftest import RawIdentity, raw_register, unique_name
from .test_delivery_mode import AFFINITY, ROUND_ROBIN, next_push, owner_of, pull, queue_connect, send

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


# -- 1. a gateway restart ------------------------------------------------------------------------


async def test_after_a_restart_the_first_member_back_does_not_take_the_others_messages(tmp_path: Path) -> None:
    data = tmp_path / "restarted"
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as gateway:
        alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
        sender = await alice.connect(gateway, device_id="alice-device")
        for device in ("bob-1", "bob-2"):
            await queue_connect(gateway, bob, device, ROUND_ROBIN)
        sent = [await send(sender, bob.aid, str(i)) for i in range(4)]  # pushed, never acknowledged
        owners = {s["seq"]: owner_of(gateway, s["message_id"]) for s in sent}
    assert sorted(owners.values()) == ["bob-1", "bob-1", "bob-2", "bob-2"]
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as gateway:
        two = await queue_connect(gateway, bob, "bob-2", ROUND_ROBIN)  # back first
        mine = [seq for seq, device in owners.items() if device == "bob-2"]
        assert [m["seq"] for m in (await pull(two, alice.aid))["messages"]] == mine  # its own, no more
        one = await queue_connect(gateway, bob, "bob-1", ROUND_ROBIN)  # back within the grace period
        theirs = [seq for seq, device in owners.items() if device == "bob-1"]
        assert [m["seq"] for m in (await pull(one, alice.aid))["messages"]] == theirs  # as they were
        assert gateway.events.find("message.reissued", receiver=bob.aid) == []


async def affinity_before_a_restart(data: Path) -> tuple[RawIdentity, RawIdentity, RawIdentity, list[dict[str, Any]]]:
    """bob with two sender_affinity members: alice's three messages on bob-1, carol's one on bob-2,
    none acknowledged; then the gateway stops."""
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as gateway:
        alice, carol, bob = [await raw_register(gateway, unique_name(n)) for n in ("alice", "carol", "bob")]
        for device in ("bob-1", "bob-2"):
            await queue_connect(gateway, bob, device, AFFINITY)
        from_alice = await alice.connect(gateway, device_id="alice-device")
        sent = [await send(from_alice, bob.aid, f"a{i}") for i in range(3)]
        from_carol = await carol.connect(gateway, device_id="carol-device")
        carols = await send(from_carol, bob.aid, "c0")
        assert [owner_of(gateway, s["message_id"]) for s in sent] == ["bob-1"] * 3
        assert owner_of(gateway, carols["message_id"]) == "bob-2"
    return alice, carol, bob, sent


async def test_after_a_restart_a_senders_messages_wait_for_its_member_in_order(tmp_path: Path) -> None:
    data = tmp_path / "restarted"
    alice, carol, bob, before = await affinity_before_a_restart(data)
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as gateway:
        two = await queue_connect(gateway, bob, "bob-2", AFFINITY)
        from_alice = await alice.connect(gateway, device_id="alice-device")
        # bob-1 is not back yet: alice's new messages join her others, for bob-1, in order.
        later = [await send(from_alice, bob.aid, f"a{i}") for i in (3, 4)]
        assert {s["status"] for s in later} == {"stored"}
        assert [owner_of(gateway, s["message_id"]) for s in later] == ["bob-1", "bob-1"]
        assert (await pull(two, alice.aid))["messages"] == []
        # carol's member is back: hers go to it, pushed.
        from_carol = await carol.connect(gateway, device_id="carol-device")
        carols = await send(from_carol, bob.aid, "c1")
        assert carols["status"] == "delivered" and (await next_push(two))["message_id"] == carols["message_id"]
        one = await queue_connect(gateway, bob, "bob-1", AFFINITY)
        page = await pull(one, alice.aid)
        assert [m["legacy_v1"]["payload"]["text"] for m in page["messages"]] == [f"a{i}" for i in range(5)]
        assert [m["seq"] for m in page["messages"]] == [s["seq"] for s in before + later]
        # And alice stays with bob-1 now that it is back.
        last = await send(from_alice, bob.aid, "a5")
        assert last["status"] == "delivered" and (await next_push(one))["message_id"] == last["message_id"]
        assert gateway.events.find("message.reissued", receiver=bob.aid) == []


async def test_a_member_not_back_when_the_grace_ends_has_its_messages_reissued_in_order(tmp_path: Path) -> None:
    data = tmp_path / "restarted"
    alice, _carol, bob, before = await affinity_before_a_restart(data)
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as gateway:
        two = await queue_connect(gateway, bob, "bob-2", AFFINITY)
        from_alice = await alice.connect(gateway, device_id="alice-device")
        later = [await send(from_alice, bob.aid, f"a{i}") for i in (3, 4)]  # held for bob-1
        gateway.core.queue.end_rejoin_grace()  # what the grace timer does
        copies = [await gateway.events.wait("message.reissued", receiver=bob.aid, from_seq=s["seq"])
                  for s in before + later]
        assert {c.fields["device_id"] for c in copies} == {"bob-2"}
        page = await pull(two, alice.aid)
        assert [m["legacy_v1"]["payload"]["text"] for m in page["messages"]] == [f"a{i}" for i in range(5)]
        assert [m["seq"] for m in page["messages"]] == [c.fields["seq"] for c in copies]  # in alice's order
        # bob-1, back late, gets none of them again; alice's next message goes where hers went.
        one = await queue_connect(gateway, bob, "bob-1", AFFINITY)
        assert (await pull(one, alice.aid))["messages"] == []
        last = await send(from_alice, bob.aid, "a5")
        assert owner_of(gateway, last["message_id"]) == "bob-2"


async def test_the_grace_period_ends_by_itself(tmp_path: Path) -> None:
    data = tmp_path / "restarted"
    _alice, _carol, bob, before = await affinity_before_a_restart(data)
    limits = GatewayLimits(queue_rejoin_grace=0.2)
    async with GatewayServer("127.0.0.1", port=0, data_dir=data, limits=limits) as gateway:
        two = await queue_connect(gateway, bob, "bob-2", AFFINITY)
        for original in before:
            await gateway.events.wait("message.reissued", receiver=bob.aid, from_seq=original["seq"])
        push = await next_push(two)  # the newest copy, its chain showing the rest
        assert push["inline_message"]["legacy_v1"]["payload"]["text"] == "a2"


def test_the_grace_period_is_a_bounded_non_negative_number() -> None:
    with pytest.raises(ValueError, match="queue_rejoin_grace"):
        GatewayLimits(queue_rejoin_grace=-1.0)




# -- a take-over under way keeps a sender's order too ---------------------------------------------


async def test_messages_sent_during_a_take_over_follow_the_moved_ones_in_order(
    gateway: GatewayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_queue, "TAKEOVER_BATCH", 3)
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    leaving = await queue_connect(gateway, bob, "bob-1", AFFINITY)
    staying = await queue_connect(gateway, bob, "bob-2", AFFINITY)
    first = [await send(sender, bob.aid, str(i)) for i in range(12)]
    assert {owner_of(gateway, s["message_id"]) for s in first} == {"bob-1"}
    disconnected = gateway.events.wait("disconnected", aid=bob.aid)
    await leaving.close()
    await disconnected
    # While the twelve move to bob-2 three at a time, alice sends twelve more, all at once.
    for i in range(12, 24):
        await sender.ws.send(json.dumps({"jsonrpc": "2.0", "id": f"s{i}", "method": "message.send",
                                         "params": {"to": bob.aid, "payload": {"text": str(i)}}}))
    answers = [await sender.answer() for _ in range(12)]
    assert all("result" in a for a in answers), answers
    for original in first:
        await gateway.events.wait("message.reissued", receiver=bob.aid, from_seq=original["seq"])
    held = [a["result"] for a in answers if a["result"]["status"] == "stored"]
    for message in held:  # those that waited behind the moving ones were moved after them
        (assigned,) = gateway.events.find("message.assigned", message_id=message["message_id"], how="held")
        await gateway.events.wait("message.reissued", receiver=bob.aid, from_seq=assigned.fields["seq"])
    page = await pull(staying, alice.aid)
    assert [m["legacy_v1"]["payload"]["text"] for m in page["messages"]] == [str(i) for i in range(24)]
