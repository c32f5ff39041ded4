"""End-to-end encrypted groups across the bridge: an exposed agent's group messages are encrypted
by default, and it decrypts what plain AUN clients post to its groups with their default options."""

from __future__ import annotations

import asyncio
import sqlite3

from aun_runtime import Inbox, RecordKind
from aun_runtime.gateway import GatewayServer

from .conftest import eventually, info_of
from .test_groups import Bridged, Clients, inboxes, kinds_for


def _stored(gateway: GatewayServer) -> str:
    """Every row of the gateway's group message log, read from its SQLite file."""
    gateway.core.db.commit_sync()
    with sqlite3.connect(gateway.data_dir / "gateway.sqlite3") as conn:
        return "\n".join(body for (body,) in conn.execute("SELECT body FROM group_messages"))


async def test_an_exposed_agent_and_a_plain_client_talk_in_an_encrypted_group(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    anna = f"anna.{info.issuer}"
    first, _ = await bridged(info, "first", inboxes("anna"))
    user = await plain_clients(info, "user")
    # The plain client owns the group: its client signs the membership state that names anna.
    created = await user.client.call("group.create", {"group_id": "sealed", "name": "sealed"})
    group_id = created["group"]["group_id"]
    await user.client.call("group.add_member", {"group_id": group_id, "aid": anna})
    await gateway.events.wait("group.state.confirmed", group_id=group_id, state_version=2)

    await user.client.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": "psst, anna"}})
    await eventually(lambda: kinds_for(first, anna, "psst, anna") == [RecordKind.RECEIVED], what="anna's copy")
    got = next(r.message for r in first.archive.history(anna) if r.message and r.message.text == "psst, anna")
    assert (got.group_id, got.from_aid, got.seq) == (group_id, user.aid, 1)

    anna_inbox = await first.agent_instance(anna, Inbox)
    await anna_inbox.group_send(group_id, "heard you")
    seen = await asyncio.wait_for(user.group.get(), 20)
    assert (seen["from"], seen["payload"]["text"], seen["encrypted"]) == (anna, "heard you", True)

    stored = _stored(gateway)
    assert stored.count('"version":"v2"') == 2 and "psst" not in stored and "heard you" not in stored
    assert first.archive.dead_letters() == []


async def test_a_group_the_gateway_agent_creates_is_encrypted_for_every_member(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    anna, bert = f"anna.{info.issuer}", f"bert.{info.issuer}"
    first, first_agent = await bridged(info, "first", inboxes("anna"))
    second, _ = await bridged(info, "second", inboxes("bert"))
    user = await plain_clients(info, "user")
    crew = await first_agent.create_group("crew", owner=anna, members=[bert, user.aid])
    await gateway.events.wait("group.state.confirmed", group_id=crew, state_version=3)

    anna_inbox = await first.agent_instance(anna, Inbox)
    await anna_inbox.group_send(crew, "all hands at noon")
    seen = await asyncio.wait_for(user.group.get(), 20)
    assert (seen["from"], seen["payload"]["text"], seen["encrypted"]) == (anna, "all hands at noon", True)
    await eventually(lambda: kinds_for(second, bert, "all hands at noon") == [RecordKind.RECEIVED], what="bert's copy")

    await user.client.call("group.send", {"group_id": crew, "payload": {"type": "text", "text": "on my way"}})
    for runtime, member in ((first, anna), (second, bert)):
        await eventually(lambda r=runtime, m=member: kinds_for(r, m, "on my way") == [RecordKind.RECEIVED],  # type: ignore[misc]
                         what=f"{member}'s copy")
    assert "all hands" not in _stored(gateway) and "on my way" not in _stored(gateway)
