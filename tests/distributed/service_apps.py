"""Apps for the service AID tests (``--app tests.distributed.service_apps:<name>``), set by environment."""

from __future__ import annotations

import os
import time

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event

from .apps import Source, Tally


async def instance(runtime: AUNRuntime) -> None:
    """``svc.local``: a Tally (``TALLY_DELAY`` seconds per message); run it with ``--service svc.local``."""
    await runtime.register_agent("svc.local", lambda: Tally(float(os.environ.get("TALLY_DELAY", "0"))))


async def sender(runtime: AUNRuntime) -> None:
    """``SOURCE_AID`` sends ``SOURCE_COUNT`` numbered messages to ``svc.local``, ``SOURCE_BURST`` at a time."""
    count, burst = int(os.environ.get("SOURCE_COUNT", "100")), int(os.environ.get("SOURCE_BURST", "0"))
    pause = float(os.environ.get("SOURCE_PAUSE", "0"))
    aid = os.environ.get("SOURCE_AID", "source.local")
    await runtime.register_agent(aid, lambda: Source("svc.local", count, burst, pause), eager=True)


class GatedSource(AUNAgent):
    """Sends ``first`` numbered messages, then, when told ``go``, ``more`` after them."""

    def __init__(self, first: int, more: int) -> None:
        super().__init__("sends in two rounds")
        self.first, self.more = first, more

    async def on_start(self) -> None:
        self.schedule(lambda: self.send_from(0, self.first))

    async def send_from(self, start: int, count: int) -> None:
        for n in range(start, start + count):
            await self.send("svc.local", str(n))

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.text == "go":  # the test's opener: the next instance is up
            self.schedule(lambda: self.send_from(self.first, self.more))
        else:
            self.think(f"got {message.text}")


async def gated_sender(runtime: AUNRuntime) -> None:
    """``source.local`` sends ``SOURCE_COUNT`` messages, then ``SOURCE_MORE`` when told ``go``."""
    first, more = int(os.environ["SOURCE_COUNT"]), int(os.environ["SOURCE_MORE"])
    await runtime.register_agent("source.local", lambda: GatedSource(first, more), eager=True)


async def opener(runtime: AUNRuntime) -> None:
    """Tells ``source.local`` to go on."""
    inbox = await runtime.open_inbox("opener.local")
    await inbox.send("source.local", "go")


class _Blocking(Tally):
    """A Tally whose first handling from message ``BLOCK_FROM`` on blocks its event loop for
    ``BLOCK_SECONDS`` (a synchronous sleep, as a handler that computes without awaiting would)."""

    blocked = False  # once per process: after it rejoins, its agents start afresh but must not block again

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        if not _Blocking.blocked and message.text.isdigit() and int(message.text) >= int(os.environ["BLOCK_FROM"]):
            _Blocking.blocked = True
            print(f"blocking the event loop at {message.text}", flush=True)
            time.sleep(float(os.environ["BLOCK_SECONDS"]))  # noqa: ASYNC251 - blocking the loop is the point
        await super().on_any(message, ctx)


async def blocking_instance(runtime: AUNRuntime) -> None:
    """``svc.local``: a Tally that blocks its event loop once (``BLOCK_FROM``, ``BLOCK_SECONDS``)."""
    await runtime.register_agent("svc.local", lambda: _Blocking(float(os.environ.get("TALLY_DELAY", "0"))))
