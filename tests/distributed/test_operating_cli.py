"""A host and a worker configured by environment only, the worker started before its host: the
probes say alive at once and ready only once the host is up, and `/metrics` counts the traffic
through a model agent on a loopback model (the only stand-in: the model)."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.models.openai_stand_in import Reply, openai_stand_in

from .processes import ROOT, Process, wait_until

MODEL = "stand-in-model"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def probes_url(process: Process) -> str:
    line = process.wait_for_line(lambda s: "probes on http://" in s)
    return line.split("probes on ", 1)[1].split()[0]


def samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = get(f"{url}/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_worker_started_before_its_host_is_alive_not_ready_then_ready(procs: list[Process], tmp_path: Path) -> None:
    # The answer waits until the worker's turn has been seen waiting for it (at /busy, in status).
    seen_waiting = threading.Event()

    def answer(request: dict[str, Any]) -> Reply:
        seen_waiting.wait(60)
        return Reply(answer="__REPLY__ It is up.")

    with openai_stand_in(answer) as model:
        host_address = f"127.0.0.1:{free_port()}"
        worker = Process(["worker"], env={
            "PYTHONPATH": str(ROOT),
            "AUN_HOST": host_address,
            "AUN_APP": "tests.distributed.operating_apps:model_team",
            "AUN_ARCHIVE": str(tmp_path / "worker.sqlite"),
            "AUN_NAME": "w1",
            "AUN_HTTP": "127.0.0.1:0",
            "AUN_CONNECT_TIMEOUT": "120",
            "AUN_MODEL": MODEL,
            "AUN_MODEL_BASE_URL": model.base_url,
            "AUN_MODEL_API_KEY": "test",
        })
        procs.append(worker)
        worker_url = probes_url(worker)
        assert get(f"{worker_url}/healthz") == (200, "ok\n")
        status, body = get(f"{worker_url}/readyz")
        assert status == 503, body
        assert "host" in json.loads(body)["missing"]

        host = Process(["host"], env={"AUN_ADDRESS": host_address, "AUN_HTTP": "127.0.0.1:0"})
        procs.append(host)
        host_url = probes_url(host)
        wait_until(lambda: get(f"{worker_url}/readyz")[0] == 200, timeout=60, what="the worker ready")
        assert get(f"{worker_url}/healthz")[0] == 200
        assert get(f"{host_url}/healthz")[0] == 200 and get(f"{host_url}/readyz")[0] == 200

        def waiting_for_model() -> bool:
            status, body = get(f"{worker_url}/busy")
            assert status == 200, body
            return any(agent["waiting_for"] == "model" and agent["mailbox"] == 1 for agent in json.loads(body)["busy"])

        wait_until(waiting_for_model, timeout=60, what="the worker's turn waiting for its model at /busy")
        assert samples(worker_url)[("aun_turns_waiting", (("for", "model"),))] == 1
        assert get(f"{host_url}/busy")[0] == 404  # the host runs no agents
        worker_probes, host_probes = worker_url.removeprefix("http://"), host_url.removeprefix("http://")
        status = Process(["status", "--host", host_address, "--busy", worker_probes, "--busy", host_probes])
        assert status.finish() == 0
        report = json.loads(status.output)
        [busy] = report["busy"][worker_probes]
        assert busy["waiting_for"] == "model" and busy["mailbox"] == 1 and busy["turn_seconds"] > 0
        assert "runs no agents" in report["busy"][host_probes]
        assert report["stats"]["workers_connected"] == 1  # the host's own report, as before
        seen_waiting.set()

        def answered() -> bool:
            return samples(worker_url).get(("aun_model_calls_total", (("model", MODEL), ("outcome", "ok"))), 0) >= 1

        wait_until(answered, timeout=60, what="the model agent's answer")
        seen = samples(worker_url)
        assert seen[("aun_model_calls_total", (("model", MODEL), ("outcome", "ok")))] == 1
        assert seen[("aun_model_tokens_total", (("direction", "input"), ("model", MODEL)))] == 7
        assert seen[("aun_model_tokens_total", (("direction", "output"), ("model", MODEL)))] == 3
        assert seen[("aun_model_call_duration_seconds_count", (("model", MODEL),))] == 1
        assert seen[("aun_sends_total", ())] == 2  # the question and the answer
        assert seen[("aun_deliveries_total", ())] >= 1
        assert seen[("aun_turn_duration_seconds_count", ())] >= 1
        assert seen[("aun_agents", ())] == 2
        at_host = samples(host_url)
        assert at_host[("aun_host_workers", ())] == 1
        assert at_host[("aun_host_registrations_total", ())] == 2  # the observer and the inbox
        assert len(model.requests) == 1 and model.requests[0]["model"] == MODEL
        wait_until(lambda: json.loads(get(f"{worker_url}/busy")[1]) == {"busy": []}, timeout=30, what="nobody busy")
        assert samples(worker_url)[("aun_agents_busy", ())] == 0


async def test_the_host_answers_grpcs_standard_health_check() -> None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from aun_runtime.distributed import AUNHost

    host = AUNHost("127.0.0.1:0")
    await host.open()
    try:
        async with grpc.aio.insecure_channel(host.address) as channel:
            answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await host.stop(grace=0)


def test_a_worker_waits_for_its_database_alive_and_not_ready(procs: list[Process]) -> None:
    closed = free_port()  # nothing listens there: the database is not up yet
    worker = Process(["worker", "--http", "127.0.0.1:0"], env={
        "AUN_APP": "tests.distributed.operating_apps:model_team",
        "AUN_ARCHIVE": f"postgresql://aun@127.0.0.1:{closed}/aun", "AUN_NAME": "w1", "AUN_CONNECT_TIMEOUT": "60",
    })
    procs.append(worker)
    url = probes_url(worker)
    worker.wait_for_line(lambda s: "waiting up to 60 s for the database" in s)
    assert get(f"{url}/healthz")[0] == 200
    status, body = get(f"{url}/readyz")
    assert status == 503 and "waiting for the database" in json.loads(body)["missing"]["storage"]
    assert worker.proc.poll() is None  # it waits rather than exits
    assert worker.terminate(timeout=8) == 0  # and a stop ends the wait at once, cleanly


def test_a_worker_waiting_for_its_host_stops_at_once_on_sigterm(procs: list[Process], tmp_path: Path) -> None:
    worker = Process(["worker", "--http", "127.0.0.1:0"], env={
        "AUN_HOST": f"127.0.0.1:{free_port()}", "AUN_APP": "tests.distributed.operating_apps:model_team",
        "AUN_ARCHIVE": str(tmp_path / "w.sqlite"), "AUN_CONNECT_TIMEOUT": "60",
    })
    procs.append(worker)
    url = probes_url(worker)
    assert get(f"{url}/readyz")[0] == 503
    assert worker.terminate(timeout=8) == 0  # not the 10 s deadline's 143


def test_run_and_the_gateway_serve_their_probes_too(procs: list[Process], tmp_path: Path) -> None:
    gateway = Process(["gateway", "--port", "0", "--data", str(tmp_path / "gw"), "--http", "127.0.0.1:0"])
    run = Process(["run", "tests.distributed.operating_apps:logging_team"], env={"AUN_HTTP": "127.0.0.1:0"})
    procs.extend([gateway, run])
    for process in (gateway, run):
        url = probes_url(process)
        wait_until(lambda url=url: get(f"{url}/readyz") == (200, '{"ready": true, "missing": {}}\n'), timeout=30,
                   what=f"{process.args[0]} ready")
        assert get(f"{url}/healthz") == (200, "ok\n")
    seen = samples(probes_url(run))
    assert seen[("aun_agents", ())] == 2 and seen[("aun_sends_total", ())] == 1
