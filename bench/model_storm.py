"""A rate-limit storm at one endpoint: the shared limiter vs agents each retrying on their own clock.

N ``AutonomousAgent`` (``--agents``, default 10, 50 and 200) share one OpenAI-compatible endpoint on
loopback (a threaded HTTP server in this process) that answers 429 with ``Retry-After: 2`` to every
request for its first ``--storm`` seconds, then answers each with a ``reply``. A person asks each
agent one question at once. Two ways of calling the endpoint, each in its own run:

* ``limiter``: the runtime's clients (``ModelConfig.build``): one limiter for the endpoint, shared
  by every agent, one probe per ``Retry-After`` during the storm, 8 calls in flight at most.
* ``own_clock``: autogen-ext's OpenAI client on its own (the OpenAI SDK's retries, 20 of them, each
  honouring the ``Retry-After`` it was given): every agent retries on its own clock.

Reported per run: requests that reached the endpoint during the storm, the same per agent,
``drain_s`` (from the storm's end until the last answer arrived), answers and dead letters. Prints
one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNRuntime, RecordKind
from aun_runtime.models import ModelConfig

RETRY_AFTER = 2
INFO = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
        "structured_output": False, "multiple_system_messages": True}


class StormServer:
    """429 for `storm` seconds from the first request, then a reply to each."""

    def __init__(self, storm: float) -> None:
        self.storm = storm
        self.started: float | None = None
        self.in_storm = 0
        self.after = 0
        self.last_answer = 0.0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                now = time.monotonic()
                with lock:
                    if server.started is None:
                        server.started = now
                    raging = now - server.started < server.storm
                    if raging:
                        server.in_storm += 1
                    else:
                        server.after += 1
                if raging:
                    body, status = {"error": {"message": "rate limited", "type": "rate_limit"}}, 429
                else:
                    call = {"id": "call_1", "type": "function",
                            "function": {"name": "reply", "arguments": json.dumps({"text": "here"})}}
                    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "storm",
                            "choices": [{"index": 0, "finish_reason": "tool_calls",
                                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                    status = 200
                data = json.dumps(body).encode()
                self.send_response(status)
                if raging:
                    self.send_header("retry-after", str(RETRY_AFTER))
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                with lock:
                    server.last_answer = max(server.last_answer, time.monotonic()) if not raging else server.last_answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.request_queue_size = 512
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"


def own_clock_model(base_url: str) -> Any:
    from autogen_core.models import ModelInfo
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    return OpenAIChatCompletionClient(model="storm", base_url=base_url, api_key="sk-local", max_retries=20,
                                      timeout=120, model_info=ModelInfo(**INFO))  # type: ignore[typeddict-item]


async def one_run(agents: int, way: str, storm: float) -> dict[str, Any]:
    server = StormServer(storm)
    server.thread.start()
    try:
        config = ModelConfig(source="openai", model="storm", base_url=server.base_url, model_info=INFO)
        runtime = AUNRuntime()
        aids = [f"a{n}.local" for n in range(agents)]
        for aid in aids:
            await runtime.register_agent(
                aid, lambda: AutonomousAgent(config if way == "limiter" else own_clock_model(server.base_url))
            )
        human = await runtime.open_inbox("alice.local")
        await runtime.start()
        for aid in aids:
            await human.send(aid, "how are things?")
        await asyncio.wait_for(runtime.settle(), timeout=600)
        answers = sum(1 for r in runtime.archive.records(kinds=[RecordKind.RECEIVED], limit=100_000)
                      if r.owner == "alice.local")
        dead = runtime.stats.dead_letters
        await runtime.close()
    finally:
        server.http.shutdown()
        server.http.server_close()
    storm_end = (server.started or 0.0) + storm
    return {
        "agents": agents, "way": way, "requests_in_storm": server.in_storm,
        "requests_per_agent": round(server.in_storm / agents, 2), "requests_after": server.after,
        "drain_s": round(max(0.0, server.last_answer - storm_end), 2), "answers": answers, "dead_letters": dead,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--storm", type=float, default=10.0, help="seconds of 429s (default 10)")
    args = parser.parse_args()
    runs = [await one_run(n, way, args.storm) for n in args.agents for way in ("limiter", "own_clock")]
    ratios = {
        str(n): round(
            next(r for r in runs if r["agents"] == n and r["way"] == "own_clock")["requests_in_storm"]
            / max(1, next(r for r in runs if r["agents"] == n and r["way"] == "limiter")["requests_in_storm"]), 1)
        for n in args.agents
    }
    print(json.dumps({"bench": "model_storm", "storm_s": args.storm, "retry_after_s": RETRY_AFTER,
                      "runs": runs, "own_clock_over_limiter_requests": ratios}))


if __name__ == "__main__":
    asyncio.run(main())
