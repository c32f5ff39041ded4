"""The application the bridge tests run in ``aun-runtime run`` subprocesses, configured by ``BRIDGE_APP``.

``BRIDGE_APP`` is JSON: ``{"agents": {"alice": "relay", "sink": "counter"}, "stream": {"from": "alice",
"to": "sink.aun.localhost", "count": 200, "pace": 0.005}}``. Agents (in the runtime's domain):

* ``relay``: obeys ``bridge.command`` json messages (sends and group posts it is told to make),
  answers ``ping ...`` texts with ``pong: ...``, and thinks ``handled ...`` for every message it
  handles, which is how a test counts handler runs in another process: from its archive.
* ``counter``: thinks ``got <sender> <n>`` for every numbered message ``n=<n>`` it handles.

With ``stream``, the ``from`` agent sends ``count`` numbered messages to ``to``, ``pace`` seconds
apart: when it starts if ``"at_start": true``, else when it is sent the text ``go``.
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, JsonPayload, MessageContext, event

COMMAND_KIND = "bridge.command"


class Relay(AUNAgent):
    """Does what commands say; answers pings; notes every message it handles."""

    @event
    async def on_arrival(self, message: AUNMessage, ctx: MessageContext) -> None:
        where = message.group_id or "direct"
        self.think(f"handled {message.from_aid} {where} {message.text or message.payload.type}")
        payload = message.payload
        if isinstance(payload, JsonPayload) and payload.kind == COMMAND_KIND:
            for order in payload.data["sends"]:
                if "group" in order:
                    await self.group_send(order["group"], order["text"], mentions=order.get("mentions"))
                else:
                    await self.send(order["to"], order["text"])
        elif message.group_id is None and message.text and message.text.startswith("ping"):
            await self.reply(f"pong: {message.text}")


class Counter(AUNAgent):
    """Notes each numbered message it handles."""

    @event
    async def on_arrival(self, message: AUNMessage, ctx: MessageContext) -> None:
        text = message.text or ""
        if text.startswith("n="):
            self.think(f"got {message.from_aid} {text[2:]}")


class Streamer(Counter):
    """A counter that sends a numbered stream (``BRIDGE_APP``'s ``stream``), at start or when told."""

    stream: ClassVar[dict[str, Any]] = {}

    async def on_start(self) -> None:
        if self.stream.get("at_start"):
            self.schedule(self._run)

    @event
    async def on_arrival(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.text == "go":
            self.schedule(self._run)
        else:
            await super().on_arrival(message, ctx)

    async def _run(self) -> None:
        import asyncio

        for n in range(int(self.stream["count"])):
            await self.send(self.stream["to"], f"n={n}")
            if self.stream.get("pace"):
                await asyncio.sleep(float(self.stream["pace"]))


KINDS: dict[str, type[AUNAgent]] = {"relay": Relay, "counter": Counter}


async def app(runtime: AUNRuntime) -> None:
    config = json.loads(os.environ.get("BRIDGE_APP", "{}"))
    stream = config.get("stream") or {}
    for name, kind in config.get("agents", {}).items():
        cls = KINDS[kind]
        if stream and stream.get("from") == name:
            cls = type("ConfiguredStreamer", (Streamer,), {"stream": stream})
        await runtime.register_agent(f"{name}.{runtime.domain}", cls)
