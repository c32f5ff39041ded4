"""Nothing lost, nothing twice: a gateway killed in the middle of two streams, a runtime killed with
messages in its outbox. Every process is real; the gateway is killed with SIGKILL, not asked to stop."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from aun_runtime import Archive, RecordKind

from .conftest import Children, PlainClient, eventually, read_archive

COUNT = 200


def handled(archive: Archive, owner: str, sender: str) -> list[int]:
    """The numbers ``owner``'s handler took from ``sender``, in the order it took them."""
    numbers = []
    for record in archive.history(owner, kinds=[RecordKind.THOUGHT], limit=10 * COUNT):
        match = re.fullmatch(r"got (\S+) (\d+)", record.text or "")
        if match and match.group(1) == sender:
            numbers.append(int(match.group(2)))
    return numbers


def outbox_rows(data_dir: Path) -> int:
    path = data_dir / "outbox.sqlite"
    if not path.exists():
        return 0
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        db.close()


async def test_gateway_killed_mid_stream_both_ways_every_message_handled_once_in_order(
    tmp_path: Path, children: Children, plain_clients: Callable[..., Awaitable[PlainClient]]
) -> None:
    gateway_process, gateway, port = await children.gateway(tmp_path / "gateway")
    east, west = f"eastern.{gateway.issuer}", f"western.{gateway.issuer}"
    east_runtime = children.runtime("east", gateway, {
        "agents": {"eastern": "counter"}, "stream": {"from": "eastern", "to": west, "count": COUNT, "pace": 0.01}})
    west_runtime = children.runtime("west", gateway, {
        "agents": {"western": "counter"}, "stream": {"from": "western", "to": east, "count": COUNT, "pace": 0.01}})
    await east_runtime.connected(east)
    await west_runtime.connected(west)
    starter = await plain_clients(gateway, "starter")
    await starter.send(east, {"type": "text", "text": "go"})
    await starter.send(west, {"type": "text", "text": "go"})
    await starter.client.close()

    east_archive, west_archive = read_archive(children.archive("east")), read_archive(children.archive("west"))
    await eventually(lambda: len(handled(west_archive, west, east)) >= 40 and len(handled(east_archive, east, west)) >= 40,
                     what="both streams under way")
    gateway_process.kill()  # mid-stream, both ways; sends go on into the outboxes meanwhile
    assert len(handled(west_archive, west, east)) < COUNT and len(handled(east_archive, east, west)) < COUNT
    await children.gateway(tmp_path / "gateway", port=port)

    await eventually(lambda: len(handled(west_archive, west, east)) >= COUNT and len(handled(east_archive, east, west)) >= COUNT,
                     timeout=90, what="both streams complete")
    for archive, owner, sender in ((west_archive, west, east), (east_archive, east, west)):
        assert handled(archive, owner, sender) == list(range(COUNT))  # each once, in the order sent
        received = [r.message for r in archive.history(owner, kinds=[RecordKind.RECEIVED], limit=10 * COUNT)
                    if r.message and r.message.from_aid == sender]
        assert len(received) == COUNT and len({m.message_id for m in received}) == COUNT
        seqs = [m.seq for m in received]
        assert seqs == sorted(seqs)  # the network's order, kept
        assert archive.dead_letters() == []
    east_archive.close()
    west_archive.close()
    for child in (east_runtime, west_runtime):
        assert child.terminate() == 0
        stopped = await child.wait_for(lambda line: line.get("event") == "stopped")
        assert stopped["stats"]["waiting"] == 0 and stopped["stats"]["dead_letters"] == 0
        assert stopped["stats"]["sent"] >= COUNT  # each message until the network had it


async def test_runtime_killed_with_a_full_outbox_delivers_after_restart(
    tmp_path: Path, children: Children, plain_clients: Callable[..., Awaitable[PlainClient]]
) -> None:
    gateway_process, gateway, port = await children.gateway(tmp_path / "gateway")
    sender, reader = f"sender.{gateway.issuer}", "reader"
    reader_client = await plain_clients(gateway, reader)
    reader_aid = reader_client.aid
    quiet = {"agents": {"sender": "counter"}}
    first = children.runtime("outboxed", gateway, quiet)
    await first.connected(sender)  # its identity now exists, locally and on the network
    assert first.terminate() == 0
    gateway_process.kill()

    # With the gateway gone, the runtime starts again and its agent sends: all into the outbox.
    count = 30
    stream = {"agents": {"sender": "counter"},
              "stream": {"from": "sender", "to": reader_aid, "count": count, "pace": 0, "at_start": True}}
    second = children.runtime("outboxed", gateway, stream)
    data = tmp_path / "outboxed"
    await eventually(lambda: outbox_rows(data) == count, what="the messages committed to the outbox")
    second.kill()  # and it dies with them there

    await children.gateway(tmp_path / "gateway", port=port)
    third = children.runtime("outboxed", gateway, quiet)
    await third.connected(sender)
    arrived = await reader_client.take(count, timeout=60)
    assert [m["payload"]["text"] for m in arrived] == [f"n={n}" for n in range(count)]  # in order
    assert {m["from"] for m in arrived} == {sender} and len({m["message_id"] for m in arrived}) == count
    await eventually(lambda: outbox_rows(data) == 0, what="the outbox emptied")
    assert third.terminate() == 0
    assert reader_client.direct.empty()  # nothing twice
