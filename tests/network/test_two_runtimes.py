"""Two ``aun-runtime run`` processes on one local gateway process: direct and group messages across
them, replies threaded across processes, mention filtering applied by each receiving channel."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from aun_runtime import RecordKind

from .apps import COMMAND_KIND
from .conftest import Children, PlainClient, eventually, read_archive


def command(*sends: dict[str, object]) -> dict[str, object]:
    return {"type": "json", "kind": COMMAND_KIND, "data": {"sends": list(sends)}}


async def test_agents_in_two_processes_talk_directly_and_in_a_mention_group(
    tmp_path: Path, children: Children, plain_clients: Callable[..., Awaitable[PlainClient]]
) -> None:
    gateway_process, gateway, _ = await children.gateway(tmp_path / "gateway")
    issuer = gateway.issuer
    alice, bob, carol = (f"{name}.{issuer}" for name in ("alice", "bobby", "carol"))
    first = children.runtime("first", gateway, {"agents": {"alice": "relay"}})
    second = children.runtime("second", gateway, {"agents": {"bobby": "relay", "carol": "relay"}})
    await first.connected(alice)
    await second.connected(bob, carol)

    # Someone (a plain AUN client) sets up a mention-only group on the network and sets things off.
    host = await plain_clients(gateway, "host")
    created = await host.client.call("group.create", {"group_id": "crew"})
    crew = created["group"]["group_id"]
    for member in (alice, bob, carol):
        await host.client.call("group.add_member", {"group_id": crew, "aid": member})
    await host.client.call("group.set_settings", {"group_id": crew, "settings": {"mention_mode": "mention-only"}})
    await host.send(alice, command(
        {"to": bob, "text": "ping from alice"},
        {"group": crew, "text": "bob, over to you", "mentions": [bob]},
        {"group": crew, "text": "hello everyone", "mentions": ["all"]},
    ))
    await host.send(carol, command({"group": crew, "text": "carol, to nobody in particular"}))

    first_archive, second_archive = read_archive(children.archive("first")), read_archive(children.archive("second"))

    def texts(archive_path: object, owner: str, kind: RecordKind) -> list[str]:
        archive = first_archive if archive_path == "first" else second_archive
        return [r.message.text or "" for r in archive.history(owner, kinds=[kind], limit=1000) if r.message]

    # Every member's copy arrives through its own connection, in its own time: wait for all of them.
    expected = {
        ("first", alice, RecordKind.RECEIVED): "pong: ping from alice",
        ("first", alice, RecordKind.FILTERED): "carol, to nobody in particular",
        ("second", bob, RecordKind.RECEIVED): "hello everyone",
        ("second", carol, RecordKind.RECEIVED): "hello everyone",
        ("second", carol, RecordKind.FILTERED): "bob, over to you",
        ("second", bob, RecordKind.FILTERED): "carol, to nobody in particular",
    }
    await eventually(lambda: all(text in texts(*where) for where, text in expected.items()), what="every copy")

    # Direct, across processes: delivered once, answered, and the answer threads under the question.
    ping = next(r.message for r in second_archive.history(bob, kinds=[RecordKind.RECEIVED]) if r.message and r.message.text == "ping from alice")
    pong = next(r.message for r in first_archive.history(alice, kinds=[RecordKind.RECEIVED]) if r.message and r.message.text == "pong: ping from alice")
    assert ping.from_aid == alice and ping.to == bob
    assert pong.from_aid == bob and pong.in_reply_to == ping.message_id and pong.thread == ping.thread
    assert pong.hops == ping.hops + 1  # the loop guard's count goes on across the network
    assert ping.seq is not None and pong.seq is not None  # the network's inbox positions are kept

    # The group: every member's runtime got every post; each channel showed only what names its agent.
    assert texts("second", bob, RecordKind.RECEIVED).count("bob, over to you") == 1
    assert "bob, over to you" not in texts("second", carol, RecordKind.RECEIVED)
    assert "carol, to nobody in particular" not in texts("second", bob, RecordKind.RECEIVED)
    filtered = next(r for r in second_archive.history(carol, kinds=[RecordKind.FILTERED]) if r.message and r.message.text == "bob, over to you")
    assert filtered.reason == "mention mode: not mentioned" and filtered.message is not None
    assert filtered.message.group_id == crew and filtered.message.from_aid == alice
    # The sender's own posts are not delivered back to it.
    assert not [t for t in texts("first", alice, RecordKind.RECEIVED) if t in ("bob, over to you", "hello everyone")]

    # Exactly once at the handler: every handled message was handled one time.
    for archive in (first_archive, second_archive):
        handled = Counter((r.owner, r.text) for r in archive.records(kinds=[RecordKind.THOUGHT]))
        assert handled and max(handled.values()) == 1, handled
    assert first_archive.dead_letters() == [] and second_archive.dead_letters() == []
    first_archive.close()
    second_archive.close()
    assert first.terminate() == 0 and second.terminate() == 0
    stopped = await second.wait_for(lambda line: line.get("event") == "stopped")
    assert stopped["stats"]["waiting"] == 0 and stopped["stats"]["dead_letters"] == 0
    gateway_process.terminate()
