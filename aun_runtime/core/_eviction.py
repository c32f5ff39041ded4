"""Idle eviction: which agent instances have been idle long enough to be dropped, and when to look.

autogen-core keeps every agent instance it ever created (upstream issues #4893, #5374), so memory grows
with every AID or session ever addressed. An actor runtime can do what virtual-actor systems do:
an instance whose mailbox has been empty for `idle_timeout` seconds is saved (`save_state`) and
dropped, and a new one is created, with that state loaded, for its next message.

`IdleList` only keeps time: agents enter it when their mailbox runs empty and leave it when a
message arrives, both in O(1); one timer wakes up when the oldest entry is due, and hands the due
cells to the runtime, which does the saving and dropping.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from autogen_core import AgentId

from ._actor_cell import Cell

__all__ = ["DEFAULT_IDLE_TIMEOUT", "EVICTION_BATCH", "IdleList"]

#: Seconds an agent instance may sit idle (empty mailbox, nothing running) before it is saved and
#: dropped. Long enough that a conversation's pauses (a model call elsewhere, a human typing) never
#: cost a re-creation; short enough that a runtime addressed by many short sessions stays small.
DEFAULT_IDLE_TIMEOUT = 600.0
#: Evictions done before the runtime lets other work run; keeps a mass eviction from stalling delivery.
EVICTION_BATCH = 256
#: The timer fires at most this often relative to the timeout (evictions happen between 1.0 and
#: 1.1 times ``idle_timeout`` after the agent went idle), so agents going idle one by one are
#: evicted in batches rather than with one timer each.
_GRANULARITY = 0.1


class IdleList:
    """Agents whose instance is idle, oldest first, and the timer that hands out the due ones.

    Args:
        idle_timeout: seconds of idleness before a cell is due.
        on_due: called with the due cells (from the event loop's timer callback).
    """

    def __init__(self, idle_timeout: float, on_due: Callable[[list[Cell]], None]) -> None:
        if idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive (or None to never evict)")
        self.idle_timeout = idle_timeout
        self._on_due = on_due
        self._idle: OrderedDict[AgentId, tuple[Cell, float]] = OrderedDict()
        self._timer: asyncio.TimerHandle | None = None
        self._active = False

    def __len__(self) -> int:
        return len(self._idle)

    def add(self, cell: Cell) -> None:
        """`cell` just went idle."""
        if cell.idle_listed:
            self._idle.move_to_end(cell.agent_id)
        cell.idle_listed = True
        loop = asyncio.get_running_loop()
        self._idle[cell.agent_id] = (cell, loop.time())
        if self._timer is None and self._active:
            self._arm(loop)

    def discard(self, cell: Cell) -> None:
        """`cell` is busy again (or gone)."""
        if cell.idle_listed:
            cell.idle_listed = False
            self._idle.pop(cell.agent_id, None)

    def start(self) -> None:
        self._active = True
        if self._idle:
            self._arm(asyncio.get_running_loop())

    def stop(self) -> None:
        self._active = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def due(self, now: float, older_than: float) -> list[Cell]:
        """Take every cell idle for at least `older_than` seconds off the list."""
        found: list[Cell] = []
        idle = self._idle
        while idle:
            _, (cell, since) = next(iter(idle.items()))
            if now - since < older_than:
                break
            idle.popitem(last=False)
            cell.idle_listed = False
            found.append(cell)
        return found

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        _, (_, since) = next(iter(self._idle.items()))
        delay = max(since + self.idle_timeout - loop.time(), self.idle_timeout * _GRANULARITY)
        self._timer = loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if not self._active:
            return
        loop = asyncio.get_running_loop()
        cells = self.due(loop.time(), self.idle_timeout)
        if cells:
            self._on_due(cells)
        if self._idle:
            self._arm(loop)
