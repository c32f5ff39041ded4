"""Testing helpers, shipped with the runtime: scripted agents whose behaviour a test can count on.

Each agent is a plain [`AUNAgent`][aun_runtime.AUNAgent] configured by its constructor arguments, so a
test registers it with `runtime.register_agent(aid, lambda: Replier(times=3))`. They live in an
importable module so that the same agents can run in worker processes.

This module holds only what a user's tests need and can use anywhere: nothing here starts a
server or touches the machine's network. The infrastructure a test of a distributed app needs and
no test should fake (a throwaway PostgreSQL server, network namespaces) is apart, in
[`aun_runtime.testing.infrastructure`][aun_runtime.testing.infrastructure], with its pytest
fixtures in `aun_runtime.testing.pytest_plugin`. (Its names, once exported here, are still found here
with a `DeprecationWarning` that names their new home.)

Example:
    ```python
    async with AUNRuntime() as runtime:
        await runtime.register_agent("twice.local", lambda: Replier(times=2))
        inbox = await runtime.open_inbox()
        question = await inbox.send("twice.local", "hello?")
        await runtime.settle()
        assert len(inbox.replies_to(question)) == 2
    ```
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from autogen_core import MessageContext
from autogen_core.models import UserMessage

from protocols.aun import AUNMessage

from ..api._agent import AUNAgent, event
from ..models import ScriptedChatCompletionClient, metered

__all__ = [
    "Bouncer",
    "Forwarder",
    "Gate",
    "Pondering",
    "Raiser",
    "Recorder",
    "Replier",
    "Silent",
    "Speaker",
    "Stuck",
]


class Recorder(AUNAgent):
    """Keeps every message handed to it, and how many handlers ran at once (an actor: never above 1).

    Args:
        delay: seconds each handler awaits, to give concurrency a chance to show.

    Example:
        ```python
        recorder = Recorder(delay=0.01)
        await runtime.register_agent("rec.local", lambda: recorder)
        ...  # send it several messages at once, then settle
        assert recorder.max_running == 1  # one turn at a time
        ```
    """

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__("records what it receives")
        self.delay = delay
        self.received: list[AUNMessage] = []
        self.running = 0
        self.max_running = 0

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            else:
                await asyncio.sleep(0)
            self.received.append(message)
        finally:
            self.running -= 1


class Replier(AUNAgent):
    """Answers each message `times` times (0 is a legal number of answers).

    `mentions` is passed to each [`reply`][aun_runtime.AUNAgent.reply]: None (the default) mentions the asker in
    a mention group, `[]` mentions nobody.
    """

    def __init__(self, times: int = 1, *, mentions: Sequence[str] | None = None) -> None:
        super().__init__(f"answers each message {times} times")
        self.times = times
        self.mentions = mentions

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        for n in range(1, self.times + 1):
            await self.reply(f"answer {n} of {self.times} to: {message.text}", mentions=self.mentions)


class Silent(AUNAgent):
    """Reads, thinks, and says nothing. A legal answer to anything."""

    def __init__(self) -> None:
        super().__init__("listens and never answers")
        self.seen = 0

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.seen += 1
        self.think(f"read {message.message_id} from {message.from_aid}; nothing to add")


class Speaker(AUNAgent):
    """Speaks first: on start it sends `text` to `to` (an AID) or posts it to `group`."""

    def __init__(
        self, text: str, *, to: str | None = None, group: str | None = None, mentions: Sequence[str] = ()
    ) -> None:
        super().__init__("speaks without being spoken to")
        self.text = text
        self.to = to
        self.group = group
        self.mentions = list(mentions)

    async def on_start(self) -> None:
        if self.group is not None:
            await self.group_send(self.group, self.text, mentions=self.mentions or None)
        elif self.to is not None:
            await self.send(self.to, self.text)


class Bouncer(AUNAgent):
    """Answers every message, to the sender or in the group: two of them make a storm."""

    def __init__(self) -> None:
        super().__init__("answers everything, forever")
        self.handled = 0

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.handled += 1
        await self.reply(f"re: {message.text}")


class Forwarder(AUNAgent):
    """Forwards every message it gets to `to`: a chain of them makes A->B->C->A."""

    def __init__(self, to: str) -> None:
        super().__init__(f"forwards everything to {to}")
        self.to = to
        self.handled = 0

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.handled += 1
        await self.send(self.to, f"fwd: {message.text}", in_reply_to=message)


class Raiser(AUNAgent):
    """Raises on messages whose text contains `trigger`; records the others.

    Example:
        ```python
        await runtime.register_agent("fragile.local", lambda: Raiser(trigger="boom"))
        await runtime.send("fragile.local", "boom now")
        await runtime.settle()
        [dead] = runtime.archive.dead_letters()  # the failed turn is a dead letter, with its reason
        ```
    """

    def __init__(self, trigger: str = "boom") -> None:
        super().__init__("fails on purpose")
        self.trigger = trigger
        self.handled: list[str] = []

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        if self.trigger in (message.text or ""):
            raise RuntimeError(f"{self.trigger}: handler failed on purpose")
        self.handled.append(message.text or "")


class Gate(AUNAgent):
    """Holds each message until the test opens the gate: a receiver that is busy on demand.

    Example:
        ```python
        gate = Gate()
        await runtime.register_agent("busy.local", lambda: gate)
        await runtime.send("busy.local", "first")
        await gate.started.wait()  # the handler is inside its turn now
        ...  # what happens while the receiver is busy
        gate.opened.set()
        ```
    """

    def __init__(self) -> None:
        super().__init__("waits for a signal before each message")
        self.opened = asyncio.Event()
        self.started = asyncio.Event()
        self.received: list[AUNMessage] = []

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.started.set()
        await self.opened.wait()
        self.received.append(message)


class Stuck(AUNAgent):
    """Never returns from a message whose text contains `trigger` (it waits for something that
    never comes, as a handler blocked on a dead connection does); answers every other message.

    Args:
        trigger: the text that makes the handler hang.
        delay: seconds it takes over every other message before it answers.
    """

    def __init__(self, trigger: str = "hang", *, delay: float = 0.0) -> None:
        super().__init__("hangs on purpose")
        self.trigger = trigger
        self.delay = delay
        self.hanging = 0  # handlers waiting forever right now
        self.answered: list[str] = []

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        text = message.text or ""
        if self.trigger in text:
            self.hanging += 1
            try:
                await asyncio.Event().wait()
            finally:
                self.hanging -= 1
        if self.delay:
            await asyncio.sleep(self.delay)
        self.answered.append(text)
        await self.reply(f"answered: {text}")


class Pondering(AUNAgent):
    """Asks its (metered, scripted) model twice about every message, then answers with the second
    answer: a model-backed agent whose calls spend its model budgets."""

    def __init__(self) -> None:
        super().__init__("thinks twice before it answers")
        self.model = metered(ScriptedChatCompletionClient(lambda request: "hmm"))

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        for _ in range(2):
            result = await self.model.create([UserMessage(content=message.text or "", source="user")])
        await self.reply(str(result.content))


#: Names this module exported before the infrastructure had a module of its own: still found here, with
#: a `DeprecationWarning` that names their home, so that a user's tests keep running while they move.
_MOVED_TO_INFRASTRUCTURE = frozenset(
    {"ExternalPostgres", "Namespace", "PostgresServer", "PostgresUnavailableError", "PrivateNetwork",
     "namespaces_unavailable", "postgres_bin_dir"}
)


def __getattr__(name: str) -> object:
    if name not in _MOVED_TO_INFRASTRUCTURE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from . import infrastructure

    warnings.warn(
        f"aun_runtime.testing.{name} moved to aun_runtime.testing.infrastructure.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(infrastructure, name)
