"""What an actor runtime keeps for one agent, and for one published message.

A `Cell` exists while an agent has an instance in memory or messages on their way to it; it
is dropped when the instance is evicted with nothing pending, so an idle agent costs nothing here.
A `Delivery` is made once per publish and shared by every recipient: the message is not
copied and its context is built once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from autogen_core import Agent, AgentId, CancellationToken, MessageContext

from ..delivery._mailbox import Mailbox

if TYPE_CHECKING:
    from ._actor_tracing import PublishTrace

__all__ = ["Cell", "Delivery", "LazyCancellationToken"]

_LOCK_CREATION = threading.Lock()


class LazyCancellationToken(CancellationToken):
    """A `CancellationToken` that makes its lock and callback list on first use.

    Every publish needs a token for its `MessageContext`, and almost none is ever cancelled or
    linked to anything: this one costs one small object until someone does.
    """

    def __init__(self) -> None:  # the parent's __init__ would make the lock and the list at once
        self._cancelled = False

    def __getattr__(self, name: str) -> Any:
        # Only reached while the lock and list are missing (the first time either is used).
        if name in ("_lock", "_callbacks"):
            with _LOCK_CREATION:
                if "_lock" not in self.__dict__:
                    self.__dict__["_callbacks"] = []
                    self.__dict__["_lock"] = threading.Lock()
            return self.__dict__[name]
        raise AttributeError(name)


class Delivery:
    """One published message on its way to its recipients.

    Attributes:
        message: the message, as published (never copied: in-process subscribers share it, as on
            autogen-core's own runtime).
        ctx: its `MessageContext` (one for all recipients: they differ in nothing).
        trace: the spans of the publish, when tracing is on.
    """

    __slots__ = ("ctx", "message", "trace")

    def __init__(self, message: Any, ctx: MessageContext, trace: PublishTrace | None = None) -> None:
        self.message = message
        self.ctx = ctx
        self.trace = trace

    def finished(self) -> None:
        """This recipient's copy is done with (handled, or reported undeliverable): the publish
        span, when traced, waits for it no longer."""
        if self.trace is not None:
            self.trace.release()


class Cell:
    """One agent (an `AgentId`): its instance, if in memory, its queue and its drain task.

    Attributes:
        agent_id: whose cell this is.
        agent: the instance, or None while it is not in memory (never created, or evicted).
        mailbox: the bound and policy on what may wait for the agent.
        queue: deliveries waiting, oldest first (None while empty, to keep idle cells small).
        task: the drain task, while the agent has messages to handle (one task per active agent).
        current: the delivery being handled right now.
        activation: the task creating the instance, while it runs; every caller waits for it.
        evicting: set while the instance is being saved and dropped.
        idle_listed: the cell is on the idle list (a candidate for eviction).
        touched: bumped whenever the cell is used; an eviction that sees it change backs off.
        resident: never evict (an instance registered as such cannot be re-created).
    """

    __slots__ = (
        "activation",
        "agent",
        "agent_id",
        "current",
        "evicting",
        "idle_listed",
        "mailbox",
        "queue",
        "resident",
        "task",
        "touched",
    )

    def __init__(self, agent_id: AgentId, mailbox: Mailbox) -> None:
        self.agent_id = agent_id
        self.agent: Agent | None = None
        self.mailbox = mailbox
        self.queue: deque[Delivery] | None = None
        self.task: asyncio.Task[None] | None = None
        self.current: Delivery | None = None
        self.activation: asyncio.Task[Agent] | None = None
        self.evicting = False
        self.idle_listed = False
        self.touched = 0
        self.resident = False

    @property
    def pending(self) -> int:
        """Deliveries waiting (not counting the one being handled)."""
        return len(self.queue) if self.queue else 0

    def quiet(self) -> bool:
        """Nothing queued, nothing being handled, nothing promised: safe to evict or drop."""
        return (
            self.task is None
            and not self.queue
            and self.current is None
            and self.activation is None
            and self.mailbox.occupancy == 0
        )
