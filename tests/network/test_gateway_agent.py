"""The gateway agent in one process with a local gateway and real AUN clients: payloads and identities
across the bridge, encryption, dead letters, liveness, and acknowledgement only after the archive."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from aun_runtime import (
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    Inbox,
    MessageContext,
    RecordKind,
    UnknownAIDError,
    event,
)
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent, LinkState, NotExposedError
from aun_runtime.network._envelope import ENVELOPE_KEY
from protocols.aun import Payload, payload_from_json

from .conftest import Gate, PlainClient, agent_named, committed, eventually, inbox_named, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]

PAYLOADS: list[dict[str, Any]] = [
    {"type": "text", "text": "hello, 世界", "format": "markdown", "mentions": [{"aid": "desk.aun.localhost"}]},
    {"type": "json", "kind": "aun.reflection.CodingTask", "data": {"task": "Print 1", "task_id": "t1"}},
    {"type": "tool_call", "call_id": "c1", "name": "search", "arguments": {"q": "aun"}},
    {"type": "tool_result", "call_id": "c1", "ok": True, "result": {"hits": 3}},
    {"type": "image", "url": "https://example.test/cat.png", "width": 640, "caption": None},
]


def without_envelope(payload: dict[str, Any]) -> dict[str, Any]:
    """What a plain client sees, minus the fields the runtime adds for its peers."""
    rest = {k: v for k, v in payload.items() if k not in ("reply_to", "thread_id")}
    context = {k: v for k, v in rest.pop("client_context", {}).items() if k != ENVELOPE_KEY}
    return {**rest, **({"client_context": context} if context else {})}


def stored_payloads(gateway: GatewayServer, receiver: str) -> list[dict[str, Any]]:
    db = sqlite3.connect(gateway.data_dir / "gateway.sqlite3")
    try:
        rows = db.execute("SELECT body FROM inbox WHERE receiver = ? ORDER BY seq", (receiver,)).fetchall()
    finally:
        db.close()
    return [json.loads(body)["legacy_v1"]["payload"] for (body,) in rows]


async def test_every_payload_kind_crosses_both_ways_with_id_seq_and_sender(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    runtime, agent = await bridged(info, "desk", inbox_named("desk"))
    desk = f"desk.{info.issuer}"
    inbox = await runtime.agent_instance(desk, Inbox)
    user = await plain_clients(info, "user")
    sent = [await user.send(desk, payload) for payload in PAYLOADS]
    arrived = [await inbox.next(timeout=20, annotations=True) for _ in PAYLOADS]
    for payload, receipt, message in zip(PAYLOADS, sent, arrived, strict=True):
        assert message is not None
        assert (message.from_aid, message.to, message.message_id, message.seq) == (
            user.aid, desk, receipt["message_id"], receipt["seq"])
        assert message.payload == payload_from_json(payload)

    for message in arrived:  # and back, each as an answer
        assert message is not None
        await inbox.send(user.aid, message.payload, in_reply_to=message)
    answers = await user.take(len(PAYLOADS))
    for payload, original, answer in zip(PAYLOADS, arrived, answers, strict=True):
        assert original is not None
        assert answer["from"] == desk and answer["encrypted"] is True
        assert answer["payload"]["reply_to"] == {"message_id": original.message_id}
        expected: Payload = payload_from_json(payload)
        assert payload_from_json(without_envelope(answer["payload"])) == expected
    # End to end encrypted: the gateway stored ciphertext only.
    stored = stored_payloads(gateway, user.aid)
    assert len(stored) == len(PAYLOADS) and {p["type"] for p in stored} == {"e2ee.p2p_encrypted"}
    assert "世界" not in json.dumps(stored, ensure_ascii=False)
    assert agent.stats.sent == len(PAYLOADS) and agent.stats.received == len(PAYLOADS)


async def test_plaintext_only_when_asked(gateway: GatewayServer, bridged: Bridged, plain_clients: Clients) -> None:
    info = info_of(gateway)
    runtime, _ = await bridged(info, "open", inbox_named("open"), encrypt=False)
    user = await plain_clients(info, "user")
    await runtime.send(user.aid, "nothing secret", sender=f"open.{info.issuer}")
    got = await user.next()
    assert got["encrypted"] is False and got["payload"]["text"] == "nothing secret"
    assert stored_payloads(gateway, user.aid)[0]["text"] == "nothing secret"


async def test_what_cannot_cross_is_a_dead_letter_never_a_silent_loss(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    desk, mute = f"desk.{info.issuer}", f"mute.{info.issuer}"

    async def register(runtime: AUNRuntime) -> None:
        await runtime.open_inbox(desk)
        await runtime.open_inbox(mute)

    runtime, agent = await bridged(info, "desk", register, expose=(desk,))
    inbox = await runtime.agent_instance(desk, Inbox)
    user = await plain_clients(info, "user")

    # No such AID on the network: the send is taken, then refused for good by the network.
    await inbox.send(f"nobody.{info.issuer}", "anyone?")
    await eventually(lambda: agent.stats.dead_letters == 1, what="the refusal")
    [refused] = runtime.archive.dead_letters()
    assert refused.owner == desk and refused.message is not None and refused.message.text == "anyone?"
    assert refused.reason is not None and "NetworkRefusedError" in refused.reason and "-32602" in refused.reason

    # A sender with no AUN identity: refused at once, recorded.
    with pytest.raises(NotExposedError, match="not exposed"):
        await runtime.send(user.aid, "let me out", sender=mute)
    assert runtime.archive.dead_letters()[-1].owner == mute

    # An arrival that is no AUN message is recorded and acknowledged; what follows still arrives.
    bad = await user.send(desk, {"type": "text"})
    good = await user.send(desk, {"type": "text", "text": "after the bad one"})
    arrived = await inbox.next(timeout=20)
    assert arrived is not None and arrived.text == "after the bad one"
    await gateway.events.wait("message.acked", receiver=desk, ack_seq=good["seq"])
    unusable = runtime.archive.dead_letters()[-1]
    assert unusable.owner == desk and unusable.message is None
    assert unusable.reason is not None and bad["message_id"] in unusable.reason and "InvalidMessageError" in unusable.reason
    assert agent.stats.refused == 1

    # Without the gateway agent, the runtime is back to its own rules.
    await agent.stop()
    with pytest.raises(UnknownAIDError):
        await inbox.send(user.aid, "hello?")


async def test_ping_asks_the_network_and_never_guesses(gateway: GatewayServer, bridged: Bridged, plain_clients: Clients) -> None:
    info = info_of(gateway)
    runtime, _ = await bridged(info, "desk", inbox_named("desk"))
    user = await plain_clients(info, "user", connect=False)  # registered, offline: still reachable
    assert await runtime.ping(f"desk.{info.issuer}") is True
    assert await runtime.ping(user.aid) is True
    assert await runtime.ping(f"nobody.{info.issuer}") is False
    await gateway.stop()
    assert await runtime.ping(user.aid) is False  # our connection to the network is down


async def test_a_message_is_acknowledged_only_once_its_record_is_committed(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients, tmp_path: Path
) -> None:
    info = info_of(gateway)
    Gate.release = asyncio.Event()
    slow = f"slow.{info.issuer}"
    runtime, agent = await bridged(info, "slow", agent_named("slow", Gate))
    user = await plain_clients(info, "user")
    first = await user.send(slow, {"type": "text", "text": "first"})
    await gateway.events.wait("message.acked", receiver=slow, ack_seq=first["seq"])
    second = await user.send(slow, {"type": "text", "text": "second"})
    await eventually(lambda: agent.stats.received == 2, what="the second message handed over by the client")
    await eventually(lambda: runtime.mailbox(slow).occupancy == 2, what="the second message in the mailbox")
    # Delivered to the runtime, waiting for the agent's turn, not yet in the archive: not acknowledged.
    assert max(e.fields["ack_seq"] for e in gateway.events.find("message.acked", receiver=slow)) == first["seq"]
    assert [m.text for m in committed(runtime, slow)] == ["first"]
    Gate.release.set()
    await gateway.events.wait("message.acked", receiver=slow, ack_seq=second["seq"])
    # The acknowledgement came after the commit: another process reading the file sees the record now.
    assert [m.text for m in committed(runtime, slow)] == ["first", "second"]


class Bouncer(AUNAgent):
    """Answers every message, forever: across two runtimes that is a storm, unless the hops carry over."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(f"{message.text}+")


async def test_the_loop_guard_stops_a_storm_that_crosses_the_network(gateway: GatewayServer, bridged: Bridged) -> None:
    info = info_of(gateway)
    east, west = f"bounce-east.{info.issuer}", f"bounce-west.{info.issuer}"

    async def register_east(runtime: AUNRuntime) -> None:
        await runtime.register_agent(east, Bouncer)

    async def register_west(runtime: AUNRuntime) -> None:
        await runtime.register_agent(west, Bouncer)

    first, _ = await bridged(info, "east", register_east, max_hops=6)
    second, _ = await bridged(info, "west", register_west, max_hops=6)
    await first.send(west, "ball", sender=east)
    await eventually(lambda: first.stats.loop_stops + second.stats.loop_stops == 1, what="the loop stop")
    stops = first.archive.records(kinds=[RecordKind.LOOP_STOP]) + second.archive.records(kinds=[RecordKind.LOOP_STOP])
    assert len(stops) == 1 and stops[0].message is not None and stops[0].message.hops == 7
    assert first.stats.sent + second.stats.sent == 7  # hops 0 to 6, each message once


async def test_a_client_the_gateway_told_to_stay_away_is_connected_again(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    desk = f"desk.{info.issuer}"
    runtime, agent = await bridged(info, "desk", inbox_named("desk"))
    inbox = await runtime.agent_instance(desk, Inbox)
    user = await plain_clients(info, "user")
    assert agent.states() == {desk: LinkState.CONNECTED}
    connections = len(gateway.events.find("connected", aid=desk))
    await gateway.disconnect(desk, code=4003)  # a close code after which the AUN client does not reconnect
    await gateway.events.wait("disconnected", aid=desk)
    await user.send(desk, {"type": "text", "text": "are you back?"})
    arrived = await inbox.next(timeout=30)
    assert arrived is not None and arrived.text == "are you back?"
    assert len(gateway.events.find("connected", aid=desk)) > connections
    assert agent.states() == {desk: LinkState.CONNECTED}
