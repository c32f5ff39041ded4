"""Fixtures for the console tests: a runtime, a console beside it, an HTTP client, an SSE reader."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from aun_runtime import AUNRuntime
from aun_runtime.console import Console

#: Tests poll faster than people need: the page should follow within a few ticks.
TEST_POLL_INTERVAL = 0.02
#: Upper bound for anything a test waits for (never a sleep: a wait that ends when the thing happens).
TIMEOUT = 10.0


@pytest.fixture
async def runtime() -> AsyncIterator[AUNRuntime]:
    runtime = AUNRuntime()
    await runtime.start()
    yield runtime
    await runtime.close()


@pytest.fixture
async def open_console() -> AsyncIterator[Callable[..., Awaitable[Console]]]:
    """``console = await open_console(source, allow_send=True)``: started now, stopped after the test."""
    started: list[Console] = []

    async def start(source: Any, **options: Any) -> Console:
        options.setdefault("poll_interval", TEST_POLL_INTERVAL)
        console = Console(source, **options)
        await console.start()
        started.append(console)
        return console

    yield start
    for console in started:
        await console.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session:
        yield session


@dataclass
class SSEEvent:
    event: str
    data: str
    id: str | None

    def json(self) -> Any:
        return json.loads(self.data)


async def next_event(response: aiohttp.ClientResponse, *, skip: tuple[str, ...] = ()) -> SSEEvent:
    """The next Server-Sent Event on ``response`` (comments skipped, and events named in ``skip``)."""
    while True:
        event, data, event_id = "message", [], None
        while True:
            raw = await response.content.readline()
            if not raw:
                raise EOFError("the event stream ended")
            line = raw.decode().rstrip("\n")
            if not line:
                break
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                event_id = value
        if data and event not in skip:
            return SSEEvent(event, "\n".join(data), event_id)
