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
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from ..base._errors import BudgetExceeded, HopLimitExceeded

if TYPE_CHECKING:
    from protocols.aun import AUNMessage

    from ._agent_host import AgentHost

__all__ = ["ACTING", "INBOUND", "Actor", "repeating", "run_proactive"]


class Actor(Protocol):
    """An agent, as the acting context sees it: an AID living in a host."""

    @property
    def aid(self) -> str: ...

    @property
    def aun(self) -> AgentHost: ...


INBOUND: contextvars.ContextVar[AUNMessage | None] = contextvars.ContextVar("aun_inbound", default=None)
ACTING: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("aun_acting", default=None)


async def run_proactive(actor: Actor, action: Callable[[], Awaitable[None]], *, what: str = "a proactive action") -> bool:
    """Run `action` as `actor`, answering no message, as one turn under the actor's handler
    timeout: what it sends starts threads of its own.

    A loop or budget stop ends it (already recorded by the refused send or call); any other failure,
    a timeout included, is the actor's dead letter. While the runtime stops, it does not run.

    Returns:
        True if the action ran to its end; False if it did not run or failed (a repeating action
        then stops, see `repeating`).
    """
    host = actor.aun
    turns = host.turns
    if turns.closing:
        return False
    turn = turns.begin(actor.aid, None, host.handler_timeout_of(actor.aid), what)
    token = INBOUND.set(None)
    acting = ACTING.set(actor)
    try:
        await action()
        return True
    except (HopLimitExceeded, BudgetExceeded):
        return False
    except asyncio.CancelledError:
        cause = turns.cut_off(turn)
        if cause is None:
            raise
        host.record_dead_letter(actor.aid, None, cause)
        return False
    except Exception as exc:
        host.record_dead_letter(actor.aid, None, turns.cut_off(turn) or exc)
        return False
    finally:
        turns.end(turn)
        ACTING.reset(acting)
        INBOUND.reset(token)


def repeating(
    run_once: Callable[[], Awaitable[bool]], *, delay: float, every: float | None
) -> Callable[[], Coroutine[Any, Any, None]]:
    """`run_once` run after `delay` seconds, then (if `every` is set) every `every` seconds,
    for as long as each run succeeds (returns True). The waits between runs are no turns: only the
    runs are held to the handler timeout."""

    async def run() -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        while await run_once() and every is not None:  # noqa: ASYNC110 - a timer, not a wait for a condition
            await asyncio.sleep(every)

    return run
