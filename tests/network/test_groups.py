"""Groups across the bridge: a group on the network (the gateway fans out, each receiving channel
filters, also for what it pulls after being away), and a runtime's own group with members elsewhere
(each gets its copy)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from aun_runtime import AUNRuntime, DispatchMode, Inbox, RecordKind
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent
from aun_runtime.network._envelope import ENVELOPE_KEY

from .conftest import PlainClient, agent_config, eventually, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]


def inboxes(*names: str) -> Callable[[AUNRuntime], Awaitable[None]]:
    async def register(runtime: AUNRuntime) -> None:
        for name in names:
            await runtime.open_inbox(f"{name}.{runtime.domain}")

    return register


def kinds_for(runtime: AUNRuntime, owner: str, text: str) -> list[RecordKind]:
    return [r.kind for r in runtime.archive.history(owner) if r.message is not None and r.message.text == text]


async def test_a_network_group_spans_runtimes_and_plain_clients_and_each_channel_filters(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    issuer = info.issuer
    anna, bert, cleo = (f"{name}.{issuer}" for name in ("anna", "bert", "cleo"))
    first, first_agent = await bridged(info, "first", inboxes("anna"))
    second, _ = await bridged(info, "second", inboxes("bert", "cleo"))
    user = await plain_clients(info, "user")
    crew = await first_agent.create_group("crew", owner=anna, members=[bert, cleo, user.aid], dispatch_mode="mention")
    assert crew == f"crew.{issuer}"

    anna_inbox = await first.agent_instance(anna, Inbox)
    sent = await anna_inbox.group_send(crew, "bert, the figures please", mentions=[bert])
    assert sent.seq is None  # the network numbers it
    # Each member's copy comes through its own connection: wait for both, in whatever order they come.
    await eventually(lambda: kinds_for(second, cleo, "bert, the figures please") == [RecordKind.FILTERED]
                     and kinds_for(second, bert, "bert, the figures please") == [RecordKind.RECEIVED], what="the copies")
    bert_inbox = await second.agent_instance(bert, Inbox)
    got = await bert_inbox.next(timeout=10)
    assert got is not None and (got.group_id, got.from_aid, got.dispatch_mode) == (crew, anna, DispatchMode.MENTION)
    assert got.seq is not None and got.message_id == sent.message_id
    seen = await asyncio.wait_for(user.group.get(), 20)
    assert (seen["group_id"], seen["from"], seen["payload"]["text"]) == (crew, anna, "bert, the figures please")

    # A plain client posts without mentioning anyone: every agent's channel keeps it from its agent.
    await user.client.call("group.send", {"group_id": crew, "payload": {"type": "text", "text": "lunch?"}, "encrypt": False})
    await eventually(lambda: kinds_for(first, anna, "lunch?") == [RecordKind.FILTERED], what="anna's record")
    await eventually(lambda: kinds_for(second, bert, "lunch?") == kinds_for(second, cleo, "lunch?") == [RecordKind.FILTERED],
                     what="bert's and cleo's records")
    # bert answers the group in the thread: it reaches anna's runtime through the network.
    await bert_inbox.group_send(crew, "anna: 42", mentions=[anna], in_reply_to=got)
    await eventually(lambda: kinds_for(first, anna, "anna: 42") == [RecordKind.RECEIVED], what="the answer at anna")
    answer = next(r.message for r in first.archive.history(anna, kinds=[RecordKind.RECEIVED]) if r.message and r.message.text == "anna: 42")
    assert answer.in_reply_to == sent.message_id and answer.thread == sent.thread


async def test_a_group_message_pulled_after_being_away_keeps_the_groups_mode(
    gateway: GatewayServer, bridged: Bridged, tmp_path: Path
) -> None:
    # Pushed to a connected member, a message carries the group's mode snapshot; pulled by a member
    # that comes back, it must too, or every channel would pass it to its agent as if broadcast.
    info = info_of(gateway)
    issuer = info.issuer
    anna, bert, cleo = (f"{name}.{issuer}" for name in ("anna", "bert", "cleo"))
    first, first_agent = await bridged(info, "first", inboxes("anna"))
    second, second_agent = await bridged(info, "second", inboxes("bert", "cleo"))
    crew = await first_agent.create_group("crew", owner=anna, members=[bert, cleo], dispatch_mode="mention")
    anna_inbox = await first.agent_instance(anna, Inbox)
    await second_agent.stop()
    sent = await anna_inbox.group_send(crew, "bert, while you were away", mentions=[bert])

    back = GatewayAgent(second, agent_config(info, tmp_path / "second"))
    await back.start()
    try:
        await eventually(lambda: kinds_for(second, bert, sent.text) == [RecordKind.RECEIVED]
                         and kinds_for(second, cleo, sent.text) == [RecordKind.FILTERED], what="the pulled copies")
        kept = next(r.message for r in second.archive.history(bert) if r.message and r.message.text == sent.text)
        assert (kept.group_id, kept.message_id, kept.dispatch_mode) == (crew, sent.message_id, DispatchMode.MENTION)
    finally:
        await back.stop()


async def test_a_runtime_group_with_members_elsewhere_sends_each_its_copy(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    issuer = info.issuer
    anna, bert = f"anna.{issuer}", f"bert.{issuer}"
    first, _ = await bridged(info, "first", inboxes("anna"))
    second, _ = await bridged(info, "second", inboxes("bert"))
    user = await plain_clients(info, "user")
    await first.create_group("standup", [anna, bert, user.aid], dispatch_mode="mention")
    anna_inbox = await first.agent_instance(anna, Inbox)
    sent = await anna_inbox.group_send("standup", "user, your turn", mentions=[user.aid])
    assert sent.seq == 1

    copy = await user.next()  # to a plain client, a direct message that says which group it is from
    assert copy["payload"]["text"] == "user, your turn" and copy["from"] == anna
    assert copy["payload"]["client_context"][ENVELOPE_KEY]["group"] == {
        "group_id": "standup", "seq": 1, "dispatch_mode": "mention"}
    # To another runtime, the group message again: its channel applies the mode snapshot.
    await eventually(lambda: kinds_for(second, bert, "user, your turn") == [RecordKind.FILTERED], what="bert's copy")
    kept = next(r.message for r in second.archive.history(bert) if r.message)
    assert (kept.group_id, kept.seq, kept.message_id, kept.dispatch_mode) == ("standup", 1, sent.message_id, DispatchMode.MENTION)
    assert first.archive.dead_letters() == []

