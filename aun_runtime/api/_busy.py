"""`AgentBusy`: what a busy agent is doing now, so that a held mailbox is never a mystery.

A model answer that takes 30 s, a storm at the endpoint, a turn waiting for its retry: each holds
the agent's mailbox, and its next messages wait. [`AUNRuntime.busy`][aun_runtime.AUNRuntime.busy]
says, for each agent with a turn in flight or messages waiting: since when the turn runs, what it
waits for (`model limiter`, `model`, `tool`, `retry`, or nothing: it is working), which try it is,
how many messages its mailbox holds, and how old the oldest of them is.

It is a snapshot read from what the runtime keeps anyway (the turns in flight, each mailbox's
occupancy): nothing on the delivery path is timed for it. The oldest message is the one being
handled (a mailbox is FIFO), and its age is counted from when its sender made it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..delivery._endpoint import Endpoint
from ..delivery._turns import Turn

__all__ = ["AgentBusy", "busy_agents"]


@dataclass(frozen=True)
class AgentBusy:
    """One agent's turn in flight and mailbox, now.

    Attributes:
        aid: the agent.
        turn_seconds: how long its turn in flight has run (None: no turn in flight).
        waiting_for: what the turn waits for: `model limiter`, `model`, `tool`, `retry`; None: working.
        waiting_seconds: for how long it has waited for that.
        attempt: which try of its message the turn is (1: the first).
        message_id: the message the turn handles (None: a proactive turn, or none).
        mailbox: messages its mailbox holds (waiting, or being handled).
        oldest_seconds: the age of the oldest of them (the one being handled), from its creation.
    """

    aid: str
    turn_seconds: float | None
    waiting_for: str | None
    waiting_seconds: float | None
    attempt: int
    message_id: str | None
    mailbox: int
    oldest_seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for JSON."""
        return asdict(self)

    def describe(self) -> str:
        """One line: `bot.local: waiting for model 12.0 s (turn 14.2 s, try 2), 3 in mailbox, oldest 15.0 s`."""
        if self.turn_seconds is None:
            doing = "no turn in flight"
        elif self.waiting_for is None:
            doing = f"working (turn {self.turn_seconds:.1f} s, try {self.attempt})"
        else:
            doing = (
                f"waiting for {self.waiting_for} {self.waiting_seconds or 0:.1f} s "
                f"(turn {self.turn_seconds:.1f} s, try {self.attempt})"
            )
        oldest = f", oldest {self.oldest_seconds:.1f} s" if self.oldest_seconds is not None else ""
        return f"{self.aid}: {doing}, {self.mailbox} in mailbox{oldest}"


def busy_agents(turns: Iterable[Turn], endpoints: Mapping[str, Endpoint]) -> list[AgentBusy]:
    """The agents with a turn in flight or a message in their mailbox, by AID."""
    now = asyncio.get_running_loop().time()
    wall_ms = time.time() * 1000
    in_flight: dict[str, Turn] = {}
    for innermost in turns:
        turn: Turn | None = innermost
        while turn is not None:  # a turn may run inside another's (an on_start inside a handler)
            in_flight.setdefault(turn.aid, turn)
            turn = turn.outer
    held = {aid: endpoint.occupancy for aid, endpoint in endpoints.items() if endpoint.occupancy}
    found: list[AgentBusy] = []
    for aid in sorted(set(in_flight) | set(held)):
        turn = in_flight.get(aid)
        message = turn.message if turn is not None else None
        found.append(
            AgentBusy(
                aid=aid,
                turn_seconds=None if turn is None else now - turn.started,
                waiting_for=None if turn is None else turn.waiting,
                waiting_seconds=None if turn is None or turn.waiting is None else now - turn.waiting_since,
                attempt=1 if turn is None else turn.attempt,
                message_id=None if message is None else message.message_id,
                mailbox=held.get(aid, 0),
                oldest_seconds=None if message is None else max(0.0, (wall_ms - message.created_at) / 1000),
            )
        )
    return found
