"""Traces by the standard OTEL_* environment, exported over OTLP/HTTP to a loopback receiver that
decodes the protobuf: two workers of one host, configured by environment only; a question goes
from an inbox through a relay on one worker to a model agent on the other and its answer comes
back. Every turn of that thread, on both workers, and the model call are in one trace; the spans
carry the AUN ids; the model call is a GenAI span, a child of the turn that made it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.models.openai_stand_in import openai_stand_in

from .processes import ROOT, Process, start_host, start_worker, wait_until
from .test_operating_cli import MODEL


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OTLP/HTTP trace receiver on loopback: its endpoint, and every span it received."""
    spans: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource.resource.attributes}.get("service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        spans.append({
                            "service": service, "name": span.name, "trace": span.trace_id.hex(),
                            "id": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                        })
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", spans
    finally:
        server.shutdown()
        server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def test_one_trace_per_thread_across_two_workers(procs: list[Process], tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, spans), openai_stand_in(lambda request: "__REPLY__ It is up.") as model:
        host, address = start_host()
        procs.append(host)
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100", "PYTHONPATH": str(ROOT)}
        model_env = {"AUN_MODEL": MODEL, "AUN_MODEL_BASE_URL": model.base_url, "AUN_MODEL_API_KEY": "test"}
        procs.append(start_worker(address, "tests.distributed.operating_apps:model_side", tmp_path / "b.sqlite",
                                  env={**otel, **model_env, "OTEL_SERVICE_NAME": "model-side"}))
        procs.append(start_worker(address, "tests.distributed.operating_apps:asking_side", tmp_path / "a.sqlite",
                                  env={**otel, "OTEL_SERVICE_NAME": "asking-side"}))

        def turns() -> list[dict[str, Any]]:
            return [span for span in list(spans) if span["name"].startswith("aun turn ") and "aun.message_id" in span["attributes"]]

        # relay (the question), observer (on the other worker), relay (the answer)
        wait_until(lambda: len(turns()) >= 3, timeout=60, what="three turns exported")
        wait_until(lambda: any(s["name"] == f"chat {MODEL}" for s in list(spans)), timeout=30, what="the model span")
        seen = turns()
        by_aid = {(s["service"], s["attributes"]["aun.aid"]) for s in seen}
        assert by_aid == {("asking-side", "relay.local"), ("model-side", "observer.local")}
        [thread] = {s["attributes"]["aun.thread_id"] for s in seen}
        assert len({s["attributes"]["aun.message_id"] for s in seen}) == 3
        assert len({s["trace"] for s in seen}) == 1  # one trace for the thread, across both workers
        [observer] = [s for s in seen if s["attributes"]["aun.aid"] == "observer.local"]
        assert observer["attributes"]["aun.from_aid"] == "relay.local"
        [call] = [s for s in list(spans) if s["name"] == f"chat {MODEL}"]
        assert call["parent"] == observer["id"] and call["trace"] == observer["trace"]
        assert call["attributes"] == {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
            "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3,
        }
        assert thread in {s["attributes"]["aun.message_id"] for s in seen}  # the question began the thread


def test_run_traces_tool_calls_and_model_calls_inside_their_turns(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    with otlp_receiver() as (endpoint, spans):
        done = subprocess.run(
            [sys.executable, "-m", "aun_runtime", "run", "agents.demo:app", "--until-idle"], cwd=ROOT,
            env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "demo"},
            capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0, done.stderr  # the spans left in the batch are exported as it ends
        by_id = {span["id"]: span for span in spans}
        tools = [span for span in spans if span["name"] == "execute_tool calculate"]
        assert tools  # the helper's calculator, once per sum
        tool = tools[0]
        named = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculate"}
        assert all(t["attributes"].items() >= named.items() for t in tools)
        failed = [t["attributes"] for t in tools if "error.type" in t["attributes"]]
        assert len(failed) < len(tools), failed
        turn = by_id[tool["parent"]]
        assert turn["name"] == "aun turn helper.local" and turn["trace"] == tool["trace"]
        calls = [span for span in spans if span["name"].startswith("chat ") and span["parent"] == turn["id"]]
        assert calls and all(c["attributes"]["gen_ai.operation.name"] == "chat" for c in calls)
        assert {span["service"] for span in spans} == {"demo"}
