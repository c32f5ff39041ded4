"""The console's HTTP surface: the page, its assets, a JSON API and one Server-Sent Events stream.

| route | what it serves |
|---|---|
| `GET /` | the page (plain HTML, CSS and JS from package data) |
| `GET /api/info` | what the console shows: its source, whether it may send, the archive's head |
| `GET /api/agents` | the AIDs registered with the runtime (AID, role, mode, description, card) |
| `GET /api/records` | `?after=ID&limit=N`: the first N records after ID, oldest first |
| `GET /api/events` | the live stream: `records` events whose SSE id is the last record's id |
| `GET /api/busy` | each agent with a turn in flight or messages waiting: what it waits for, since when, its mailbox (`[]` for a console on an archive alone) |
| `POST /api/redrive` | `{"record_id": N}` (or `{"aid": ..., "cause": ...}`): deliver open retryable dead letters again; 403 unless sending was enabled |
| `POST /api/send` | send as a local agent; refused with 403 unless sending was enabled |

Errors are JSON: `{"error": {"code": ..., "message": ..., "field": ...}}`, where `code` is the
name of the exception (`UnknownAIDError`...) or one of `read_only`, `invalid_parameter`,
`invalid_request`, `unsupported_media_type`, `forbidden_host`, `cross_origin`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web

from protocols.errors import AUNError

from ..api._runtime import AUNRuntime
from ._feed import PAGE_SIZE, ArchiveFeed, encode_records
from ._send_form import SendRequestError, http_status, parse_send_request, send_as_agent

__all__ = ["ConsoleState", "build_app"]

#: Seconds between two keep-alive comments on an idle event stream, so that proxies and the
#: browser do not take a quiet runtime for a dead connection.
KEEPALIVE_INTERVAL = 15.0
#: Milliseconds the browser waits before reconnecting a dropped stream (sent as SSE ``retry``).
RECONNECT_DELAY_MS = 1000

_ASSETS = {
    "index.html": "text/html",
    "console.css": "text/css",
    # The page's JavaScript modules, loaded by the browser as they are: no bundler, no build step.
    "console.js": "text/javascript",
    "dom.js": "text/javascript",
    "model.js": "text/javascript",
    "message.js": "text/javascript",
    "views.js": "text/javascript",
    "composer.js": "text/javascript",
}
_SECURITY_HEADERS = {
    # Everything the page needs comes from this server; nothing inline, nothing from elsewhere.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class ConsoleState:
    """What the request handlers share."""

    feed: ArchiveFeed
    runtime: AUNRuntime | None
    allow_send: bool
    backlog: int
    source: str
    allowed_hosts: frozenset[str] | None = None  #: None: any Host header (a non-loopback bind)


def _error(status: int, code: str, message: str, field: str | None = None) -> web.Response:
    body = {"error": {"code": code, "message": message, "field": field}}
    return web.json_response(body, status=status, headers=_SECURITY_HEADERS)


def _load_assets() -> dict[str, bytes]:
    folder = resources.files("aun_runtime.console") / "static"
    return {name: (folder / name).read_bytes() for name in _ASSETS}


def build_app(state: ConsoleState) -> web.Application:
    """The aiohttp application serving one console."""
    assets = _load_assets()

    @web.middleware
    async def guard(request: web.Request, handler: _Handler) -> web.StreamResponse:
        # A page on another site may make the browser talk to 127.0.0.1 (DNS rebinding) or post to
        # it (a cross-site form): the Host and Origin checks keep the console to its own pages.
        host = request.headers.get("Host", "")
        if state.allowed_hosts is not None and host not in state.allowed_hosts:
            return _error(
                403, "forbidden_host", f"this console answers only to {sorted(state.allowed_hosts)}"
            )
        origin = request.headers.get("Origin")
        if request.method != "GET" and origin is not None and origin != f"http://{host}":
            return _error(403, "cross_origin", f"requests from {origin} are refused")
        return await handler(request)

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info.get("name", "index.html")
        if name not in assets:
            raise web.HTTPNotFound()
        return web.Response(body=assets[name], content_type=_ASSETS[name], headers=_SECURITY_HEADERS)

    def info() -> dict[str, Any]:
        feed = state.feed
        return {
            "source": state.source,
            "read_only": not state.allow_send,
            "state": feed.state,
            "detail": feed.detail,
            "head": feed.head,
            "backlog": state.backlog,
        }

    async def get_info(request: web.Request) -> web.Response:
        return web.json_response(info(), headers=_SECURITY_HEADERS)

    async def get_agents(request: web.Request) -> web.Response:
        return web.Response(
            text=state.feed.agents_json, content_type="application/json", headers=_SECURITY_HEADERS
        )

    async def get_busy(request: web.Request) -> web.Response:
        busy = [entry.as_dict() for entry in state.runtime.busy()] if state.runtime is not None else []
        return web.json_response(busy, headers=_SECURITY_HEADERS)

    async def get_records(request: web.Request) -> web.Response:
        try:
            after = _int_param(request, "after", 0)
            limit = _int_param(request, "limit", PAGE_SIZE)
        except _ParameterError as exc:
            return _error(400, "invalid_parameter", str(exc), exc.field)
        if not 1 <= limit <= PAGE_SIZE:
            return _error(400, "invalid_parameter", f"'limit' must be between 1 and {PAGE_SIZE}", "limit")
        records = state.feed.read(after, limit)
        last = records[-1].id if records else after
        body = (
            f'{{"records":{encode_records(records)},"last_id":{last},'
            f'"head":{state.feed.head},"more":{json.dumps(len(records) == limit)}}}'
        )
        return web.Response(text=body, content_type="application/json", headers=_SECURITY_HEADERS)

    async def events(request: web.Request) -> web.StreamResponse:
        feed = state.feed
        try:
            resume = request.headers.get("Last-Event-ID")
            if resume is not None:  # a reconnect: carry on exactly where the page left off
                cursor = _parse_int("Last-Event-ID", resume)
            elif "after" in request.query:
                cursor = _int_param(request, "after", 0)
            else:  # a fresh page starts with the newest ``backlog`` records
                cursor = max(0, feed.head - state.backlog)
        except _ParameterError as exc:
            return _error(400, "invalid_parameter", str(exc), exc.field)
        response = web.StreamResponse(
            headers={**_SECURITY_HEADERS, "Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
        )
        await response.prepare(request)
        hello = {**info(), "start": cursor}
        await response.write(_sse("hello", json.dumps(hello), retry=RECONNECT_DELAY_MS))
        agents_version, status = -1, None
        try:
            while not feed.closed:
                if feed.agents_version != agents_version:
                    agents_version = feed.agents_version
                    await response.write(_sse("agents", feed.agents_json))
                if (feed.state, feed.detail) != status:
                    status = (feed.state, feed.detail)
                    await response.write(
                        _sse("status", json.dumps({"state": status[0], "detail": status[1]}))
                    )
                records = feed.read(cursor)
                if records:
                    cursor = records[-1].id
                    await response.write(_sse("records", encode_records(records), event_id=cursor))
                    if len(records) == PAGE_SIZE:
                        continue  # more waiting: send the next page at once
                if feed.head <= cursor and feed.agents_version == agents_version:
                    await feed.wait(KEEPALIVE_INTERVAL)
                    if feed.head <= cursor and feed.agents_version == agents_version:
                        await response.write(b": keep-alive\n\n")
        except (ConnectionResetError, ConnectionError):
            pass  # the page went away; its next connection resumes from Last-Event-ID
        return response

    async def send(request: web.Request) -> web.Response:
        if not state.allow_send or state.runtime is None:
            return _error(
                403,
                "read_only",
                "this console is read-only: start it with allow_send=True (aun-runtime ... --console "
                "--allow-send) next to the runtime to send as an agent",
            )
        if request.content_type != "application/json":
            return _error(
                415, "unsupported_media_type", "send a JSON body with Content-Type: application/json"
            )
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request", "the body is not valid JSON")
        try:
            message = await send_as_agent(state.runtime, parse_send_request(body))
        except SendRequestError as exc:
            return _error(400, "invalid_request", str(exc), exc.field)
        except AUNError as exc:
            return _error(http_status(exc), type(exc).__name__, str(exc), getattr(exc, "field", None))
        return web.Response(
            text=f'{{"message":{message.to_json()}}}',
            status=201,
            content_type="application/json",
            headers=_SECURITY_HEADERS,
        )

    async def redrive(request: web.Request) -> web.Response:
        if not state.allow_send or state.runtime is None:
            return _error(403, "read_only", "this console is read-only: redriving dead letters needs --allow-send")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid_request", "the body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "invalid_request", "the body is a JSON object")
        record_id, aid, cause = body.get("record_id"), body.get("aid"), body.get("cause")
        if record_id is not None and (not isinstance(record_id, int) or isinstance(record_id, bool)):
            return _error(400, "invalid_parameter", "record_id is the archive id of a dead letter", "record_id")
        for name, value in (("aid", aid), ("cause", cause)):
            if value is not None and not isinstance(value, str):
                return _error(400, "invalid_parameter", f"{name} is text", name)
        redriven = await state.runtime.redrive(aid=aid, cause=cause, record_id=record_id)
        return web.json_response({"redriven": [r.id for r in redriven]}, headers=_SECURITY_HEADERS)

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", asset)
    app.router.add_get("/static/{name}", asset)
    app.router.add_get("/api/info", get_info)
    app.router.add_get("/api/agents", get_agents)
    app.router.add_get("/api/records", get_records)
    app.router.add_get("/api/busy", get_busy)
    app.router.add_get("/api/events", events)
    app.router.add_post("/api/send", send)
    app.router.add_post("/api/redrive", redrive)
    return app


class _ParameterError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _int_param(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    return default if raw is None else _parse_int(name, raw)


def _parse_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise _ParameterError(name, f"'{name}' must be a whole number, not {raw!r}") from None
    if value < 0:
        raise _ParameterError(name, f"'{name}' must not be negative")
    return value


def _sse(event: str, data: str, *, event_id: int | None = None, retry: int | None = None) -> bytes:
    lines = []
    if retry is not None:
        lines.append(f"retry: {retry}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {event}")
    # JSON never holds a raw newline, so the data is one ``data:`` line.
    lines.append(f"data: {data}")
    return ("\n".join(lines) + "\n\n").encode()
