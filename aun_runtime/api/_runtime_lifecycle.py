"""`RuntimeLifecycle`: whether a runtime runs, and how it starts, settles, stops and closes.

Apart from the facade ([`AUNRuntime`][aun_runtime.AUNRuntime]) because stopping is its own
concern with its own order: close the turn watch, give the turns in flight their grace, cancel the
agents' scheduled actions, stop the core, cut off what the core left running, flush the archive,
and only then run the `on_stop` callbacks. The agents it knows nothing of: the facade starts
those that speak first once `start` says the runtime began to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..base._errors import RuntimeStoppedError
from ..delivery._core_protocol import AUNCore
from ..delivery._turns import Turn, TurnWatch
from ..storage._archive import Archive
from ._on_stop import StopCallback, StopCallbacks

__all__ = ["LEFTOVER_WAIT", "RuntimeLifecycle"]

logger = logging.getLogger("aun_runtime")

#: Seconds a stop waits for the turns it cancels itself (those its core left running: autogen-core's
#: single-threaded core lets handlers run on) to end. A cancelled turn ends at its next await; one
#: still running after this ignored the cancellation, is logged, and is left to itself.
LEFTOVER_WAIT = 1.0


class RuntimeLifecycle:
    """The running state of one runtime over its core, the tasks to cancel and the callbacks to
    run when it stops."""

    def __init__(self, core: AUNCore, turns: TurnWatch, archive: Archive) -> None:
        self.core = core
        self.turns = turns
        self.archive = archive
        #: Whether the runtime delivers now (between a start and a stop).
        self.running = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop_callbacks = StopCallbacks()

    async def start(self) -> bool:
        """Start the core; True if the runtime began to run now, False if it already ran."""
        if self.running:
            return False
        self.turns.reopen()
        started = self.core.start()
        if started is not None:  # a worker's start connects to its host
            await started
        self.running = True
        return True

    def keep_task(self, task: asyncio.Task[None]) -> None:
        """Cancel `task` (an agent's scheduled action) when the runtime stops."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_stop(self, callback: StopCallback, timeout: float) -> None:
        """Run `callback` once, within `timeout` seconds, when the runtime stops."""
        self._stop_callbacks.add(callback, timeout)

    async def settle(self) -> None:
        """Wait until the core is idle and the archive has written what it was given."""
        await self.core.idle()
        self.archive.flush()

    async def stop_when_idle(self) -> None:
        """Cancel the scheduled actions, let the core finish what was sent, then stop."""
        await self._cancel_tasks()
        if self.running:
            await self.core.stop_when_idle()
        self.running = False
        self.archive.flush()
        await self._stop_callbacks.run()

    async def stop(self, grace: float) -> None:
        """Stop now, the turns in flight given `grace` seconds (see `AUNRuntime.stop`)."""
        turns = self.turns
        turns.close()
        if grace > 0 and turns.in_flight and not await turns.wait(grace):
            for turn in turns.in_flight:
                logger.warning("%s of %s still ran after the %g s grace of the stop: cancelled", turn.what, turn.aid, grace)
        await self._cancel_tasks()
        if self.running:
            with contextlib.suppress(RuntimeError):  # the core was not running after all
                await self.core.stop()
        self.running = False
        # What the core left running (autogen-core's own runtime lets handlers run on) is cut off here.
        if turns.cut_all(_stopped_while_running):
            await turns.wait(LEFTOVER_WAIT)
        turns.release()
        self.archive.flush()
        await self._stop_callbacks.run()

    async def close(self) -> None:
        """Close the core and the archive (after a stop)."""
        await self.core.close()
        self.archive.close()

    async def _cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _stopped_while_running(turn: Turn) -> RuntimeStoppedError:
    return RuntimeStoppedError(f"the runtime stopped while {turn.what} of {turn.aid} ran on this message")
