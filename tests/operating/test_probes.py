"""The probes and `/metrics` of a process, over real HTTP on loopback: alive, ready only when every
condition holds (else 503 naming what is missing), and the runtime's counters as Prometheus reads
them, with no per-AID label."""

from __future__ import annotations

import json
import socket

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agents.echo import EchoTwice
from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, UnknownAIDError, event
from aun_runtime.distributed._busy_status import ask_busy
from aun_runtime.models import ScriptedChatCompletionClient, metered
from aun_runtime.models._call_stats import ModelCallStats
from aun_runtime.operating._metrics import ModelMetrics, RuntimeMetrics
from aun_runtime.operating._probes import ProbeServer, Readiness, parse_listen_address


class Fails(AUNAgent):
    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        raise ValueError("cannot")


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


async def test_ready_only_when_every_condition_holds() -> None:
    readiness = Readiness()
    linked = False
    readiness.require("host", lambda: None if linked else "not linked to the host")
    server = ProbeServer("127.0.0.1:0", readiness, [])
    url = await server.start()
    try:
        assert await fetch(f"{url}/healthz") == (200, "ok\n")
        status, body = await fetch(f"{url}/readyz")
        assert status == 503
        assert json.loads(body) == {"ready": False, "missing": {
            "start": "the command is still starting", "host": "not linked to the host"}}
        readiness.started()
        linked = True
        status, body = await fetch(f"{url}/readyz")
        assert (status, json.loads(body)) == (200, {"ready": True, "missing": {}})
        linked = False
        assert (await fetch(f"{url}/readyz"))[0] == 503
    finally:
        await server.stop()


async def test_metrics_read_the_runtimes_counters_without_per_aid_labels() -> None:
    runtime = AUNRuntime()
    server = ProbeServer("127.0.0.1:0", Readiness(), [RuntimeMetrics(runtime)])
    url = await server.start()
    async with runtime:
        await runtime.register_agent("twice.local", EchoTwice)
        await runtime.register_agent("fails.local", Fails)
        await runtime.send("twice.local", "hello")
        await runtime.send("fails.local", "hello")
        with pytest.raises(UnknownAIDError):
            await runtime.send("nobody.local", "hello")
        await runtime.settle()
        status, text = await fetch(f"{url}/metrics")
    await server.stop()
    assert status == 200
    seen = samples(text)
    assert seen[("aun_deliveries_total", ())] == runtime.stats.delivered >= 4
    assert seen[("aun_sends_total", ())] == runtime.stats.sent
    assert seen[("aun_dead_letters_total", (("reason", "ValueError"),))] == 1
    assert seen[("aun_dead_letters_total", (("reason", "UnknownAIDError"),))] == 1
    assert seen[("aun_turn_duration_seconds_count", ())] >= 2
    assert seen[("aun_turns_in_flight", ())] == 0 and seen[("aun_mailbox_messages", ())] == 0
    assert not any(value.endswith(".local") for _, labels in seen for _, value in labels)


async def test_model_calls_by_model_and_outcome() -> None:
    stats = ModelCallStats()
    stats.record("m", "ok", 0.2)
    stats.record("m", "refused", None)
    names = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for f in ModelMetrics(stats).collect() for s in f.samples}
    assert names[("aun_model_calls_total", (("model", "m"), ("outcome", "ok")))] == 1
    assert names[("aun_model_calls_total", (("model", "m"), ("outcome", "refused")))] == 1
    assert names[("aun_model_call_duration_seconds_count", (("model", "m"),))] == 1


def test_a_metered_client_is_named_by_its_model() -> None:
    assert metered(ScriptedChatCompletionClient(lambda request: "hi")).model == "ScriptedChatCompletionClient"


@pytest.mark.parametrize("text", ["9090", "host:port", "h:99999"])
def test_a_bad_listen_address_is_one_line(text: str) -> None:
    with pytest.raises(SystemExit, match="give HOST:PORT"):
        parse_listen_address(text)
    assert parse_listen_address(":9090") == ("0.0.0.0", 9090)


async def test_status_reports_a_process_that_gives_no_busy_report() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{sock.getsockname()[1]}"  # bound, not listening: the connection is refused
        found, answered = await ask_busy([nobody])
    assert not answered and found[nobody].startswith("no answer: ClientConnectorError")
    server = ProbeServer("127.0.0.1:0", Readiness(), [])  # a process with no runtime (a host, a gateway)
    await server.start()
    try:
        found, answered = await ask_busy([f"127.0.0.1:{server.port}"])
    finally:
        await server.stop()
    assert answered and "runs no agents" in found[f"127.0.0.1:{server.port}"]
