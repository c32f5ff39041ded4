"""One AID served by two ``aun-runtime run`` processes as AUN queue members (``AUN_GATEWAY_QUEUE``):
its direct messages are spread over the two, and when one is killed (SIGKILL) in the middle of a
stream, nothing is lost: the rest, and what it had not acknowledged, reach the other. When the
gateway restarts, each gets back its own unacknowledged messages, whichever reconnects first."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from aun_runtime import Archive, RecordKind
from aun_runtime.gateway import GatewayLimits, GatewayServer
from aun_runtime.network import GatewayAgentConfig

from .conftest import SEED, Child, Children, PlainClient, eventually, info_of, read_archive

APP = {"agents": {"sink": "counter"}}


def member(children: Children, name: str, gateway: GatewayServer, routing: str) -> Child:
    """``aun-runtime run`` of the counter app, its gateway agent a queue member with ``routing``."""
    info = info_of(gateway)
    args = [
        sys.executable, "-m", "aun_runtime", "run", "tests.network.apps:app", "--json",
        "--gateway-url", info.url, "--root-ca", info.root_ca_path, "--domain", info.issuer,
        "--gateway-data", str(children.tmp_path / name), "--archive", str(children.archive(name)),
    ]
    env = {"BRIDGE_APP": json.dumps(APP), "AUN_GATEWAY_SEED": SEED,
           "AUN_GATEWAY_RECONNECT_MAX_DELAY": "0.5", "AUN_GATEWAY_QUEUE": routing}
    child = Child(name, args, env)
    children.started.append(child)  # killed in teardown
    return child


def share_identity(tmp_path: Path, aid: str, source: str, target: str) -> None:
    """Give runtime ``target`` the AID's key and certificate from runtime ``source`` (same seed):
    the same AID, on a device of its own."""
    for part in ("private", "public"):
        shutil.copytree(tmp_path / source / "identities" / aid / "AIDs" / aid / part,
                        tmp_path / target / "identities" / aid / "AIDs" / aid / part)


def numbers(archive: Archive, owner: str, sender: str, kind: RecordKind) -> list[int]:
    """``n`` of the ``n=<n>`` messages from ``sender`` that ``owner`` received, or handled (THOUGHT)."""
    found = []
    for record in archive.history(owner, kinds=[kind], limit=10_000):
        if kind is RecordKind.THOUGHT:
            match = re.fullmatch(r"got (\S+) (\d+)", record.text or "")
            if match and match.group(1) == sender:
                found.append(int(match.group(2)))
        elif record.message and record.message.from_aid == sender and (record.message.text or "").startswith("n="):
            found.append(int((record.message.text or "")[2:]))
    return found


async def test_two_runtimes_share_one_aid_and_lose_nothing_when_one_is_killed(
    tmp_path: Path, gateway: GatewayServer, children: Children,
    plain_clients: Callable[..., Awaitable[PlainClient]],
) -> None:
    sink = f"sink.{gateway.issuer}"
    first = member(children, "first", gateway, "round_robin")
    await first.connected(sink)
    share_identity(tmp_path, sink, "first", "second")
    second = member(children, "second", gateway, "round_robin")
    await second.connected(sink)
    members = gateway.core.sessions_of(sink)
    assert len(members) == 2 and {s.delivery_mode.routing for s in members} == {"round_robin"}
    assert len({s.device_id for s in members}) == 2
    first_device = (tmp_path / "first" / "identities" / sink / ".device_id").read_text().strip()
    (second_device,) = {s.device_id for s in members} - {first_device}
    first_archive, second_archive = read_archive(children.archive("first")), read_archive(children.archive("second"))

    # Spread: each message to one runtime, in turn; end-to-end encrypted for both (the default).
    sender = await plain_clients(info_of(gateway), "feeder")
    for n in range(20):
        await sender.send(sink, {"type": "text", "text": f"n={n}"})

    def handled() -> tuple[list[int], list[int]]:
        return (numbers(first_archive, sink, sender.aid, RecordKind.THOUGHT),
                numbers(second_archive, sink, sender.aid, RecordKind.THOUGHT))

    await eventually(lambda: sorted(handled()[0] + handled()[1]) == list(range(20)), what="the first 20 handled")
    on_first, on_second = handled()
    assert len(on_first) == len(on_second) == 10  # round robin: half each, none twice
    assert on_first == sorted(on_first) and on_second == sorted(on_second)  # each in the order sent
    assert first_archive.dead_letters() == [] and second_archive.dead_letters() == []

    # A stream, and the first runtime killed in its middle: frozen first (SIGSTOP: it reads and
    # acknowledges nothing more, while the gateway still counts it as a member and hands it every
    # other message), then killed (SIGKILL), so it dies holding messages it never acknowledged.
    for n in range(20, 30):
        await sender.send(sink, {"type": "text", "text": f"n={n}"})
    await eventually(lambda: sorted(handled()[0] + handled()[1]) == list(range(30)), what="the stream under way")
    first.process.send_signal(signal.SIGSTOP)
    frozen = time.time()
    for n in range(30, 40):
        await sender.send(sink, {"type": "text", "text": f"n={n}"})
    stranded = [e.fields["seq"] for e in gateway.events.find("message.assigned", receiver=sink, device_id=first_device)
                if e.at >= frozen]
    assert len(stranded) == 5  # every other one of the ten
    first.kill()
    for n in range(40, 50):
        await sender.send(sink, {"type": "text", "text": f"n={n}"})

    await eventually(lambda: set(range(30, 50)) <= set(handled()[1]), timeout=60, what="every message of the stream")
    assert set(numbers(first_archive, sink, sender.aid, RecordKind.RECEIVED)) == set(range(0, 30, 2))
    # The five the frozen runtime held were re-issued to the other one, which handled them.
    moved = {e.fields["from_seq"]: e.fields for e in gateway.events.find("message.reissued", receiver=sink)}
    assert set(stranded) <= set(moved) and {m["device_id"] for m in moved.values()} == {second_device}
    assert second_archive.dead_letters() == []
    first_archive.close()
    second_archive.close()
    assert second.terminate() == 0


def test_queue_routing_is_checked_and_becomes_the_clients_delivery_mode(tmp_path: Path) -> None:
    assert GatewayAgentConfig(data_dir=tmp_path).delivery_mode == {"mode": "fanout"}
    config = GatewayAgentConfig.from_env({"AUN_GATEWAY_QUEUE": "sender_affinity"}, data_dir=tmp_path)
    assert config.delivery_mode == {"mode": "queue", "routing": "sender_affinity"}
    with pytest.raises(ValueError, match="queue_routing"):
        GatewayAgentConfig(data_dir=tmp_path, queue_routing="random")


async def test_after_a_gateway_restart_each_runtime_gets_back_its_own_unacknowledged_messages(
    tmp_path: Path, children: Children, plain_clients: Callable[..., Awaitable[PlainClient]],
) -> None:
    data = tmp_path / "gateway"
    # A grace far longer than the test, so that only the fix, not the clock, keeps the messages.
    limits = GatewayLimits(queue_rejoin_grace=600)
    async with GatewayServer("127.0.0.1", port=0, data_dir=data, limits=limits) as before:
        sink, port = f"sink.{before.issuer}", before.port
        first = member(children, "first", before, "round_robin")
        await first.connected(sink)
        share_identity(tmp_path, sink, "first", "second")
        second = member(children, "second", before, "round_robin")
        await second.connected(sink)
        first_device = (tmp_path / "first" / "identities" / sink / ".device_id").read_text().strip()
        (second_device,) = {s.device_id for s in before.core.sessions_of(sink)} - {first_device}
        first_archive, second_archive = read_archive(children.archive("first")), read_archive(children.archive("second"))
        sender = await plain_clients(info_of(before), "feeder")

        def handled() -> tuple[list[int], list[int]]:
            return (numbers(first_archive, sink, sender.aid, RecordKind.THOUGHT),
                    numbers(second_archive, sink, sender.aid, RecordKind.THOUGHT))

        # The first runtime frozen: it holds its share of ten messages, unacknowledged, when the gateway stops.
        first.process.send_signal(signal.SIGSTOP)
        frozen = time.time()
        sent = {}
        for n in range(10):
            sent[(await sender.send(sink, {"type": "text", "text": f"n={n}"}))["message_id"]] = n
        stranded = {sent[e.fields["message_id"]] for e in before.events.find("message.assigned", receiver=sink,
                                                                              device_id=first_device) if e.at >= frozen}
        assert len(stranded) == 5
        await eventually(lambda: set(handled()[1]) == set(range(10)) - stranded, what="the second runtime's share")
    async with GatewayServer("127.0.0.1", port=port, data_dir=data, limits=limits) as after:
        # The second runtime reconnects first (the first is still frozen) and takes nothing of the first's.
        await after.events.wait("connected", aid=sink, device_id=second_device, timeout=60)
        assert after.events.find("message.reissued", receiver=sink) == []
        first.process.send_signal(signal.SIGCONT)
        await after.events.wait("connected", aid=sink, device_id=first_device, timeout=60)
        await eventually(lambda: stranded <= set(handled()[0]), timeout=60, what="the first runtime's own share")
        assert not stranded & set(handled()[1])  # never handed to the other one
        assert after.events.find("message.reissued", receiver=sink) == []
        assert first_archive.dead_letters() == [] and second_archive.dead_letters() == []
    first_archive.close()
    second_archive.close()
