"""A local stand-in for an OpenAI-compatible chat server (the only fake: the model), on loopback.

It answers ``POST /v1/chat/completions`` with a reply derived from the request's content and keeps
every request it received, so a test can check what the real OpenAI client sent (model, key, JSON
mode, messages, tools) without any network beyond 127.0.0.1.

The answer function returns the assistant's text, or a :class:`ToolCalls` to answer with function
calls, as a model with function calling does, or a :class:`Reply` for a bad day: a status (429, 500)
with headers (``Retry-After``), a body that is not a completion, an answer after a delay. Each
request's arrival (``time.monotonic()``) is kept in ``arrivals``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolCalls:
    """An answer made of function calls: ``(name, arguments)`` pairs, and optional text beside them."""

    calls: list[tuple[str, dict[str, Any]]]
    content: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 7, "completion_tokens": 3})


@dataclass
class Reply:
    """An HTTP answer of the stand-in's choosing: ``status`` and ``headers``; ``body`` as JSON (None:
    an error body for a status >= 400, else a completion of ``answer``); sent after ``delay`` seconds."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    answer: str | ToolCalls = ""
    delay: float = 0.0


def _message(answer: str | ToolCalls, number: int) -> tuple[dict[str, Any], str, dict[str, int]]:
    if isinstance(answer, str):
        return {"role": "assistant", "content": answer}, "stop", {"prompt_tokens": 7, "completion_tokens": 3}
    calls = [
        {"id": f"call_{number}_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for n, (name, arguments) in enumerate(answer.calls)
    ]
    return {"role": "assistant", "content": answer.content, "tool_calls": calls}, "tool_calls", answer.usage


class OpenAIStandIn:
    def __init__(self, answer: Callable[[dict[str, Any]], str | ToolCalls | Reply]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length))
                with stand_in.lock:
                    stand_in.arrivals.append(time.monotonic())
                    stand_in.requests.append(body)
                    stand_in.headers.append({k.lower(): v for k, v in self.headers.items()})
                    number = len(stand_in.requests)
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                answer = stand_in.answer(body)
                how = answer if isinstance(answer, Reply) else Reply(answer=answer)
                if how.delay:
                    time.sleep(how.delay)
                if how.body is not None:
                    reply = how.body
                elif how.status >= 400:
                    reply = {"error": {"message": f"stand-in answers {how.status}", "type": "stand_in", "code": None}}
                else:
                    message, finish, usage = _message(how.answer, number)
                    reply = {
                        "id": f"chatcmpl-{number}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "stand-in"),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {**usage, "total_tokens": sum(usage.values())},
                    }
                data = json.dumps(reply).encode()
                self.send_response(how.status)
                for name, value in how.headers.items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"


@contextmanager
def openai_stand_in(answer: Callable[[dict[str, Any]], str | ToolCalls | Reply]) -> Iterator[OpenAIStandIn]:
    stand_in = OpenAIStandIn(answer)
    thread = threading.Thread(target=stand_in.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        stand_in.server.shutdown()
        stand_in.server.server_close()
        thread.join()
