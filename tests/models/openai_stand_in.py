"""A local stand-in for an OpenAI-compatible chat server (the only fake: the model), on loopback.

It answers ``POST /v1/chat/completions`` with a reply derived from the request's content and keeps
every request it received, so a test can check what the real OpenAI client sent (model, key, JSON
mode, messages) without any network beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OpenAIStandIn:
    def __init__(self, answer: Callable[[dict[str, Any]], str]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length))
                stand_in.requests.append(body)
                stand_in.headers.append({k.lower(): v for k, v in self.headers.items()})
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                content = stand_in.answer(body)
                reply = {
                    "id": f"chatcmpl-{len(stand_in.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "stand-in"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
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
def openai_stand_in(answer: Callable[[dict[str, Any]], str]) -> Iterator[OpenAIStandIn]:
    stand_in = OpenAIStandIn(answer)
    thread = threading.Thread(target=stand_in.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        stand_in.server.shutdown()
        stand_in.server.server_close()
        thread.join()
