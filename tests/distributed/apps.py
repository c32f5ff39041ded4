"""Apps that the cluster tests run in worker processes (``--app tests.distributed.apps:<name>``).

They are configured by environment variables, because a worker is started by command line.
"""

from __future__ import annotations

import asyncio
import os

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, UnknownAIDError, event
from aun_runtime.testing import Recorder


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


class Tally(AUNAgent):
    """Handles each message once: a thought, then a reply ``done <text>`` (both must happen once)."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__("counts what it handles")
        self.delay = delay

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        self.think(f"handled {message.text}")
        await self.reply(f"done {message.text}")


async def sink(runtime: AUNRuntime) -> None:
    """``sink.local``: a Tally (``TALLY_DELAY`` seconds per message)."""
    await runtime.register_agent("sink.local", lambda: Tally(_float("TALLY_DELAY", 0.0)))


class Source(AUNAgent):
    """Sends ``count`` numbered messages to ``to`` from the start, pausing every ``burst`` messages."""

    def __init__(self, to: str, count: int, burst: int, pause: float) -> None:
        super().__init__("sends numbered messages")
        self.to, self.count, self.burst, self.pause = to, count, burst, pause

    async def on_start(self) -> None:
        self.schedule(self.run)

    async def run(self) -> None:
        for n in range(self.count):
            await self.send(self.to, str(n))
            if self.burst and (n + 1) % self.burst == 0:
                await asyncio.sleep(self.pause)

    @event
    async def on_reply(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.think(f"got {message.text}")


async def source(runtime: AUNRuntime) -> None:
    """``source.local``: sends ``SOURCE_COUNT`` messages to ``SOURCE_TO`` (default sink.local)."""
    to = os.environ.get("SOURCE_TO", "sink.local")
    count, burst, pause = _int("SOURCE_COUNT", 100), _int("SOURCE_BURST", 0), _float("SOURCE_PAUSE", 0.0)
    await runtime.register_agent("source.local", lambda: Source(to, count, burst, pause), eager=True)


async def early_bird(runtime: AUNRuntime) -> None:
    """Sends to ``late.local`` before any worker holds it: refused as unknown, and kept."""
    inbox = await runtime.open_inbox("early.local")
    try:
        await inbox.send("late.local", "are you there yet?")
    except UnknownAIDError as exc:
        inbox.think(f"refused for now: {exc}")


async def late(runtime: AUNRuntime) -> None:
    await runtime.register_agent("late.local", Recorder)


# -- a small team, split across workers or all in one process --------------------------------------


class Writer(AUNAgent):
    """Drafts until the reviewer approves; announces the result to the team."""

    def __init__(self) -> None:
        super().__init__("writes drafts")
        self.drafts = 0

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        text = message.text or ""
        if text.startswith("task:") or text.startswith("revise"):
            self.drafts += 1
            self.think(f"drafting version {self.drafts}")
            await self.send("reviewer.local", f"draft {self.drafts}", in_reply_to=message)
        elif text.startswith("approved"):
            await self.group_send("team", f"final: draft {self.drafts}", mentions=["all"], in_reply_to=message)


class Reviewer(AUNAgent):
    """Asks for revisions until the third draft; comments in the team group, naming the scribe only."""

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        text = message.text or ""
        if message.group_id is not None:
            return
        number = int(text.split()[-1])
        await self.group_send("team", f"reviewing {text}", mentions=["scribe.local"])
        if number < 3:
            await self.reply(f"revise {text}")
        else:
            await self.reply(f"approved {text}")


TEAM = ["writer.local", "reviewer.local", "scribe.local", "app.local"]


async def team_writer_side(runtime: AUNRuntime) -> None:
    await runtime.register_agent("writer.local", Writer)
    await runtime.open_inbox("app.local")
    await runtime.create_group("team", TEAM, dispatch_mode="mention")


async def team_reviewer_side(runtime: AUNRuntime) -> None:
    await runtime.register_agent("reviewer.local", Reviewer)
    await runtime.register_agent("scribe.local", Recorder)


async def team_kickoff(runtime: AUNRuntime) -> None:
    """Starts the flow once both sides are up (run on the writer's side)."""
    await runtime.send("writer.local", "task: a haiku about queues", sender="app.local")


async def team_in_one_process(runtime: AUNRuntime) -> None:
    await team_writer_side(runtime)
    await team_reviewer_side(runtime)
    await team_kickoff(runtime)


# -- the reflection team (agents/reflection.py), split across workers or in one process ------------

REFLECTION_TASK = "Print the first 10 Fibonacci numbers, space-separated."


async def reflection_coder_side(runtime: AUNRuntime) -> None:
    from agents.reflection import Coder
    from agents.stand_ins.reflection import reflection_team

    model = reflection_team()
    await runtime.register_agent("coder.local", lambda: Coder(model, executor="executor.local"))
    await runtime.open_inbox("app.local")


async def reflection_review_side(runtime: AUNRuntime) -> None:
    from agents.reflection import Executor, Reviewer
    from agents.stand_ins.reflection import reflection_team

    model = reflection_team()
    await runtime.register_agent("executor.local", lambda: Executor(reviewer="reviewer.local"))
    await runtime.register_agent("reviewer.local", lambda: Reviewer(model, coder="coder.local"))


async def reflection_kickoff(runtime: AUNRuntime) -> None:
    from protocols.reflection import CodingTaskMsg

    await runtime.send("coder.local", CodingTaskMsg(task=REFLECTION_TASK, task_id="fib"), sender="app.local")


async def reflection_in_one_process(runtime: AUNRuntime) -> None:
    await reflection_coder_side(runtime)
    await reflection_review_side(runtime)
    await reflection_kickoff(runtime)
