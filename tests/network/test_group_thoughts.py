"""``GatewayAgentConfig.thoughts`` in groups: what exposed agents think about a message posted to a
network group (an observer's silent decision included) is put as an AUN group thought, encrypted for
the group's members, which members read and others cannot; nothing is put while the option is off."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest
from aun_core.errors import AUNError

from agents.observer import ObserverAgent
from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, Inbox, MessageContext, RecordKind, event
from aun_runtime.gateway import GatewayServer
from aun_runtime.models import ScriptedChatCompletionClient
from aun_runtime.network import GatewayAgent

from .conftest import GatewayInfo, PlainClient, eventually, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")

SILENCE = "__SILENT__ nobody asked me"


class Ponderer(AUNAgent):
    """Thinks about every message and says nothing."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.think(f"pondering {message.text!r} from {message.from_aid}")


async def start_members(gateway: GatewayServer, bridged: Bridged, name: str, **options: object
                        ) -> tuple[AUNRuntime, GatewayAgent, str, str, ScriptedChatCompletionClient]:
    """A runtime with a thinking agent and an observer that stays silent, both exposed."""
    info = info_of(gateway)
    ponderer, observer = f"ponder-{name}.{info.issuer}", f"watch-{name}.{info.issuer}"
    model = ScriptedChatCompletionClient(lambda request: SILENCE)

    async def register(runtime: AUNRuntime) -> None:
        await runtime.register_agent(ponderer, Ponderer)
        await runtime.register_agent(observer, lambda: ObserverAgent(model))

    runtime, agent = await bridged(info, name, register, **options)
    return runtime, agent, ponderer, observer, model


async def post_to_new_group(gateway: GatewayServer, info: GatewayInfo, owner: PlainClient, members: list[str],
                            text: str) -> tuple[str, dict[str, str]]:
    """A group the plain client owns, with ``members``, and the context of what it posted there."""
    created = await owner.client.call("group.create", {"group_id": "minds"})
    group_id = str(created["group"]["group_id"])
    for member in members:
        await owner.client.call("group.add_member", {"group_id": group_id, "aid": member})
    await gateway.events.wait("group.state.confirmed", group_id=group_id, state_version=1 + len(members))
    sent = await owner.client.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": text}})
    return group_id, {"type": "message", "id": sent["message_id"]}


def thoughts_of(runtime: AUNRuntime, aid: str) -> list[str]:
    return [r.text or "" for r in runtime.archive.history(aid, kinds=[RecordKind.THOUGHT])]


async def test_members_read_the_agents_group_thoughts_decrypted_and_outsiders_cannot(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    runtime, agent, ponderer, observer, model = await start_members(gateway, bridged, "on", thoughts=True)
    user, outsider = await plain_clients(info, "user"), await plain_clients(info, "outsider")
    group_id, context = await post_to_new_group(gateway, info, user, [ponderer, observer], "who takes the night shift?")

    await eventually(lambda: agent.stats.thoughts == 2, what="both group thoughts put")
    pondering = f"pondering 'who takes the night shift?' from {user.aid}"
    assert thoughts_of(runtime, ponderer) == [pondering]
    [silent] = thoughts_of(runtime, observer)
    assert silent == f"silent on {user.aid}'s message: nobody asked me" and len(model.requests) == 1
    for thinker, text in ((ponderer, pondering), (observer, silent)):
        got = await user.client.call("group.thought.get", {"group_id": group_id, "sender_aid": thinker, "context": context})
        assert got["found"] is True
        assert [(t["from"], t["payload"], t["encrypted"]) for t in got["thoughts"]] == [
            (thinker, {"type": "text", "text": text}, True)]
    # The gateway holds group ciphertext only, and neither thought went out as a message.
    stored = gateway.core.thoughts.items()
    assert [item["payload"]["type"] for item in stored] == ["e2ee.group_encrypted"] * 2
    assert "night shift" not in json.dumps(stored) and "nobody asked" not in json.dumps(stored)
    posted = [user.group.get_nowait()["from"] for _ in range(user.group.qsize())]
    assert agent.stats.sent == 0 and set(posted) <= {user.aid}
    # Not a member: refused, whatever it asks about.
    with pytest.raises(AUNError) as refused:
        await outsider.client.call("group.thought.get", {"group_id": group_id, "sender_aid": ponderer, "context": context})
    assert refused.value.code == -33006


async def test_in_plaintext_a_group_thought_is_put_unencrypted(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    _, agent, ponderer, observer, _ = await start_members(gateway, bridged, "plain", thoughts=True, encrypt=False)
    user = await plain_clients(info, "user")
    group_id, context = await post_to_new_group(gateway, info, user, [ponderer, observer], "tea?")
    await eventually(lambda: agent.stats.thoughts == 2, what="both group thoughts put")
    got = await user.client.call("group.thought.get", {"group_id": group_id, "sender_aid": ponderer, "context": context})
    assert [(t["payload"]["text"], t["encrypted"]) for t in got["thoughts"]] == [(f"pondering 'tea?' from {user.aid}", False)]


async def test_with_thoughts_off_no_group_thought_is_put(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    runtime, agent, ponderer, observer, _ = await start_members(gateway, bridged, "off")
    assert agent.config.thoughts is False
    user = await plain_clients(info, "user")
    group_id, context = await post_to_new_group(gateway, info, user, [ponderer, observer], "anyone?")
    await eventually(lambda: len(thoughts_of(runtime, ponderer)) == len(thoughts_of(runtime, observer)) == 1,
                     what="the archived thoughts")
    for thinker in (ponderer, observer):
        got = await user.client.call("group.thought.get", {"group_id": group_id, "sender_aid": thinker, "context": context})
        assert got["found"] is False
    assert len(gateway.core.thoughts) == 0 and agent.stats.thoughts == 0


async def test_thoughts_about_a_runtime_groups_copy_stay_in_the_archive_and_are_tried_once(
    gateway: GatewayServer, bridged: Bridged, caplog: pytest.LogCaptureFixture
) -> None:
    # A runtime's own group reaches a member elsewhere as a direct message carrying the group: there
    # is no such group on the network to put a group thought in.
    info = info_of(gateway)
    poster = f"poster.{info.issuer}"

    async def register(runtime: AUNRuntime) -> None:
        await runtime.open_inbox(poster)

    first, _ = await bridged(info, "first", register)
    second, agent, ponderer, _, _ = await start_members(gateway, bridged, "far", thoughts=True)
    await first.create_group("standup", [poster, ponderer])
    poster_inbox = await first.agent_instance(poster, Inbox)
    await poster_inbox.group_send("standup", "one")
    await eventually(lambda: any("could not be put" in r.getMessage() for r in caplog.records), what="the refusal logged")
    await poster_inbox.group_send("standup", "two")  # its thought is not tried: the group is known not to be there
    await eventually(lambda: len(thoughts_of(second, ponderer)) == 2, what="both thoughts archived")
    await agent.stop()  # every put it started has ended
    refused = [r for r in caplog.records if "could not be put" in r.getMessage()]
    assert len(refused) == 1 and "standup" in refused[0].getMessage()
    assert agent.stats.thoughts == 0 and len(gateway.core.thoughts) == 0
