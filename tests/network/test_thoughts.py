"""``GatewayAgentConfig.thoughts``: what an exposed agent thinks about a message from a plain AUN
client reaches that client as an encrypted AUN thought, and nothing does when the option is off."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest
from aun_core.errors import AUNError

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, RecordKind, event
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent

from .conftest import PlainClient, eventually, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


class Thinker(AUNAgent):
    """Thinks about every message, then answers it."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.think(f"weighing {message.text!r} before answering")
        await self.reply("noted")


async def start_thinker(gateway: GatewayServer, bridged: Bridged, name: str, **options: object) -> tuple[AUNRuntime, GatewayAgent, str]:
    info = info_of(gateway)
    aid = f"{name}.{info.issuer}"

    async def register(runtime: AUNRuntime) -> None:
        await runtime.register_agent(aid, Thinker)

    runtime, agent = await bridged(info, name, register, **options)
    return runtime, agent, aid


async def test_with_thoughts_on_the_sender_reads_the_agents_thought_and_the_gateway_holds_only_ciphertext(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    runtime, agent, thinker = await start_thinker(gateway, bridged, "thinker", thoughts=True)
    user = await plain_clients(info_of(gateway), "user")
    sent = await user.send(thinker, {"type": "text", "text": "ship it?"})
    assert (await user.next())["payload"]["text"] == "noted"  # the answer is a message; the thought is not
    await eventually(lambda: agent.stats.thoughts == 1, what="the thought put")
    context = {"type": "message", "id": sent["message_id"]}
    got = await user.client.call("message.thought.get", {"sender_aid": thinker, "context": context})
    text = "weighing 'ship it?' before answering"
    assert got["found"] is True
    assert [(t["from"], t["payload"], t["encrypted"]) for t in got["thoughts"]] == [
        (thinker, {"type": "text", "text": text}, True)]
    [stored] = gateway.core.thoughts.items()
    assert stored["payload"]["type"] == "e2ee.p2p_encrypted" and text not in json.dumps(stored)
    # Still archived as ever, and nothing but the answer went out as a message.
    assert [r.text for r in runtime.archive.records(kinds=[RecordKind.THOUGHT])] == [text]
    assert agent.stats.sent == 1
    # An AID that is not in the conversation is refused.
    other = await plain_clients(info_of(gateway), "other")
    with pytest.raises(AUNError) as refused:
        await other.client.call("message.thought.get", {"sender_aid": thinker, "context": context})
    assert refused.value.code == -32004


async def test_with_thoughts_off_nothing_is_put(gateway: GatewayServer, bridged: Bridged, plain_clients: Clients) -> None:
    runtime, agent, thinker = await start_thinker(gateway, bridged, "quiet-thinker")
    assert agent.config.thoughts is False
    user = await plain_clients(info_of(gateway), "user")
    sent = await user.send(thinker, {"type": "text", "text": "ship it?"})
    assert (await user.next())["payload"]["text"] == "noted"
    await eventually(lambda: len(runtime.archive.records(kinds=[RecordKind.THOUGHT])) == 1, what="the archived thought")
    got = await user.client.call("message.thought.get",
                                 {"sender_aid": thinker, "context": {"type": "message", "id": sent["message_id"]}})
    assert got["found"] is False and len(gateway.core.thoughts) == 0 and agent.stats.thoughts == 0
    assert runtime.archive._thought_watchers == []  # nothing watches, nothing added per thought
