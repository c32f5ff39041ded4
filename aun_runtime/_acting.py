"""Who is acting, on what: the two context variables every send and model call reads, and how a
proactive action (one that answers no message) is run.

* `INBOUND` is the message whose handler is running in this task (None in proactive actions).
  Sends read it to carry the thread and count hops, which is how the loop guard sees a storm.
* `ACTING` is the agent whose handler or proactive action is running: whose budgets a model
  call made here spends (see [`aun_runtime.models.MeteredChatCompletionClient`][aun_runtime.models.MeteredChatCompletionClient]).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from ._errors import BudgetExceeded, HopLimitExceeded

if TYPE_CHECKING:
    from protocols.aun import AUNMessage

    from ._host import AgentHost

__all__ = ["ACTING", "INBOUND", "Actor", "repeating", "run_proactive"]


class Actor(Protocol):
    """An agent, as the acting context sees it: an AID living in a host."""

    @property
    def aid(self) -> str: ...

    @property
    def aun(self) -> AgentHost: ...


INBOUND: contextvars.ContextVar[AUNMessage | None] = contextvars.ContextVar("aun_inbound", default=None)
ACTING: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("aun_acting", default=None)


async def run_proactive(actor: Actor, action: Callable[[], Awaitable[None]]) -> None:
    """Run `action` as `actor`, answering no message: what it sends starts threads of its own.

    A loop or budget stop ends it (already recorded by the refused send or call); any other failure
    is the actor's dead letter.
    """
    token = INBOUND.set(None)
    acting = ACTING.set(actor)
    try:
        await action()
    except (HopLimitExceeded, BudgetExceeded):
        pass
    except Exception as exc:
        actor.aun.record_dead_letter(actor.aid, None, exc)
    finally:
        ACTING.reset(acting)
        INBOUND.reset(token)


def repeating(
    action: Callable[[], Awaitable[None]], *, delay: float, every: float | None
) -> Callable[[], Awaitable[None]]:
    """`action` run after `delay` seconds, then (if `every` is set) every `every` seconds."""

    async def run() -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        while True:
            await action()
            if every is None:
                return
            await asyncio.sleep(every)

    return run
