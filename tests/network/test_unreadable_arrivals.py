"""A message the AUN client cannot parse, relayed by a gateway that did not refuse it, is a dead letter
at its recipient, acknowledged to the network, and every message after it still arrives."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aun_runtime import AUNRuntime, Inbox
from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._group_methods import _message_push
from aun_runtime.network import GatewayAgent
from aun_runtime.network._frame_guard import guard_client, salvage_frame, unreadable_reason

from .conftest import PlainClient, eventually, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]

#: One past the largest integer an AUN client reads: valid JSON, refused by the client's parser.
POISON = 2**53 + 1


async def relay_direct_poison(gateway: GatewayServer, sender: str, receiver: str, message_id: str) -> int:
    """Store and push a direct message the way the gateway does, past its own check of params
    (as a gateway without one would): the row goes into the store and out to the receiver."""
    core = gateway.core
    payload = {"type": "json", "kind": "poison", "data": {"n": POISON}}
    row = {
        "message_id": message_id, "from_aid": sender, "sender_aid": sender, "to": receiver, "version": "v1",
        "legacy_v1": {"payload": payload, "to": receiver}, "type": "json", "t_server": int(time.time() * 1000),
        "need_render": True, "sender_device_id": "elsewhere",
    }
    stored = core.inboxes.append(receiver, sender, message_id, row)
    await core.db.commit()
    core.push(receiver, "message.received", lambda s: stored.push_params(s.device_id, s.slot_id))
    return stored.seq


async def relay_group_poison(gateway: GatewayServer, group_id: str, sender: str, message_id: str) -> None:
    core = gateway.core
    group = core.groups.get(group_id)
    assert group is not None
    now = int(time.time() * 1000)
    row = core.groups.append_message(group, sender, message_id, {
        "message_id": message_id, "group_id": group_id, "group_aid": group_id, "from_aid": sender,
        "sender_aid": sender, "sender_device_id": "elsewhere", "version": "v1",
        "payload": {"type": "text", "text": "x", "n": -POISON}, "type": "text", "t_server": now, "created_at": now,
        "need_render": True, "mention_mode": group.mention_mode,
    })
    await core.db.commit()
    for member in core.groups.members(group_id):
        core.push(member.aid, "group.message_created", lambda s: _message_push(row, s.device_id, s.slot_id))


async def test_an_unreadable_direct_message_is_a_dead_letter_and_the_next_twenty_arrive(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    info = info_of(gateway)
    desk = f"desk.{info.issuer}"

    async def register(runtime: AUNRuntime) -> None:
        await runtime.open_inbox(desk)

    runtime, agent = await bridged(info, "desk", register)
    inbox = await runtime.agent_instance(desk, Inbox)
    user = await plain_clients(info, "user")
    caplog.set_level(logging.WARNING, "aun_runtime")
    poison_seq = await relay_direct_poison(gateway, user.aid, desk, "poison-direct")
    receipts = [await user.send(desk, {"type": "text", "text": f"m{index}"}) for index in range(20)]
    texts = []
    for _ in range(20):
        message = await inbox.next(timeout=20)
        assert message is not None
        texts.append(message.text)
    assert texts == [f"m{index}" for index in range(20)]
    await gateway.events.wait("message.acked", receiver=desk, ack_seq=receipts[-1]["seq"], timeout=20)
    assert receipts[0]["seq"] == poison_seq + 1  # acknowledged past the poison: it is not pulled again
    [dead] = runtime.archive.dead_letters()
    assert dead.owner == desk and dead.message is None and dead.reason is not None
    assert "poison-direct" in dead.reason and "payload.data.n" in dead.reason and "InvalidMessageError" in dead.reason
    assert agent.stats.refused == 1
    lines = [r for r in caplog.records if "poison-direct" in r.getMessage() or "cannot be read" in r.getMessage()]
    assert lines and all(r.exc_info is None for r in lines)  # logged, without a traceback


async def test_an_unreadable_group_message_is_a_dead_letter_and_the_next_twenty_arrive(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    desk = f"desk.{info.issuer}"

    async def register(runtime: AUNRuntime) -> None:
        await runtime.open_inbox(desk)

    runtime, agent = await bridged(info, "desk", register)
    inbox = await runtime.agent_instance(desk, Inbox)
    user = await plain_clients(info, "user")
    guard_client(user.client, user.aid)  # the sender is a member too: it gets the poison as well
    created = await user.client.call("group.create", {"group_id": "room"})
    group_id = created["group"]["group_id"]
    await user.client.call("group.add_member", {"group_id": group_id, "aid": desk})
    await relay_group_poison(gateway, group_id, user.aid, "poison-group")
    for index in range(20):
        await user.client.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": f"g{index}"},
                                              "encrypt": False})
    texts = []
    for _ in range(20):
        message = await inbox.next(timeout=20)
        assert message is not None and message.group_id == group_id
        texts.append(message.text)
    assert texts == [f"g{index}" for index in range(20)]
    await eventually(lambda: agent.stats.refused == 1, what="the dead letter")
    [dead] = runtime.archive.dead_letters()
    assert dead.reason is not None and "poison-group" in dead.reason and "payload.n" in dead.reason


def test_only_payloads_are_salvaged() -> None:
    frame: dict[str, Any]
    salvaged = salvage_frame('{"jsonrpc":"2.0","id":"r","result":{"messages":[{"seq":1,"payload":{"a":[1e400]}},'
                             '{"seq":2,"payload":{"b":1}}]}}')
    assert salvaged is not None
    frame, reasons = salvaged
    first, second = frame["result"]["messages"]
    assert unreadable_reason(first["payload"]) == "'payload.a[0]' is not a finite number" and reasons == [
        "'payload.a[0]' is not a finite number"]
    assert second == {"seq": 2, "payload": {"b": 1}}
    # Outside any payload nothing is invented: the frame stays refused.
    assert salvage_frame('{"jsonrpc":"2.0","id":"r","result":{"seq":9007199254740993,"payload":{"a":1e400}}}') is None
    assert salvage_frame('{"jsonrpc":"2.0","id":"r","result":{"payload":{"a":1}}}') is None  # nothing to salvage
    assert salvage_frame("[1e400]") is None
