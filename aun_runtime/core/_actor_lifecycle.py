"""The actor runtime's lifecycle: start, idle, stop, idle eviction, and agents' state.

* `start()` starts a drain for every agent with queued messages (publishing before `start` only
  queues).
* `idle()` waits until every queued message, and everything its handling caused, has been handled.
* `stop_when_idle()` is `idle()` then `stop()`.
* `stop()` never hangs and never raises for messages in flight (autogen-core 0.7.5 raises
  `task_done() called too many times` there, upstream #7007): handlers still running are cancelled
  (their `CancellationToken` too), and so are agents being created, and given `STOP_GRACE`
  seconds to finish; the message each was handling and every message still queued, including those
  published while `stop()` waited for the handlers, are reported as undeliverable with
  [`RuntimeStoppedError`][aun_runtime.RuntimeStoppedError] (the AUN facade archives them as dead letters, so they can
  be found and sent again). The runtime can be started again afterwards. A `stop()` called by a
  handler returns to it: that handler is not cancelled (its token is) and runs to its end, but its
  message is reported with the others. A caller waiting in `try_get_underlying_agent_instance`
  for an agent whose creation `stop()` cancelled is not cancelled: the agent is created again for it.
* `close()` stops, saves the instances into a durable state store, closes them and the store, and
  reports the messages still queued as `stop()` does, whatever fails on the way; only then does it
  raise a handler's exception that `stop()` raised. A second `close()` does nothing.
* `save_state()` returns the agents' own state, `{str(agent_id): state}`, for the instances in
  memory and for evicted agents (their saved state). Messages still queued are **not** part of it
  (they are not agents' state, as on autogen-core, upstream #4108): call `stop_when_idle()` first
  to have none. `load_state()` loads into instances in memory (an instance being created gets it
  once it is, and one being evicted stays) and keeps the rest until each agent is next created, so
  loading 100,000 agents' state creates no instance.
* Idle eviction (see `aun_runtime.core._eviction`): an instance is evicted only when nothing is
  queued for it, nothing is running in it, nothing is promised to its mailbox, and it allows it
  (`agent.evictable` is not False; instances registered with `register_agent_instance` are never
  evicted, since nothing could re-create them). A message that arrives while the instance is being
  saved keeps it. An agent class that does not implement `save_state` is evicted without calling
  it (autogen-core's default only warns and returns nothing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Container, Mapping
from typing import Any

from autogen_core import Agent, AgentId, BaseAgent, MessageHandlerContext

from ..base._errors import RuntimeStoppedError
from ..storage._agent_state import AgentStateStore
from ._actor_cell import Cell
from ._actor_failures import DeliveryFailures
from ._eviction import EVICTION_BATCH, IdleList

__all__ = ["STOP_GRACE", "ActorLifecycle"]

logger = logging.getLogger("aun_runtime")

#: Seconds ``stop()`` waits for cancelled handlers to finish. A handler that swallows cancellation
#: is left running after that (and logged) rather than hanging the stop.
STOP_GRACE = 5.0


def _declares_state(agent: Agent) -> bool:
    return not isinstance(agent, BaseAgent) or type(agent).save_state is not BaseAgent.save_state


class ActorLifecycle:
    """Start/stop, idleness, eviction and state of the agents of one [`AUNActorRuntime`][aun_runtime.AUNActorRuntime].

    The runtime owns one and delegates its lifecycle methods to it; the lifecycle reaches the agents
    only through what it is given here and in `connect` (the parts it calls hold it in turn, so they
    are made after it).

    Args:
        cells: the runtime's cells, by agent (shared: `ActorAgents` adds them, the lifecycle drops them).
        failures: where a message that will not be handled is reported, and a kept failure raised.
        idle_timeout: seconds an instance may stay idle before it is evicted; None never evicts.
        store: where evicted agents' state waits.

    Attributes:
        running: started and not stopped since.
        epoch: bumped by start and stop: a drain of an older epoch leaves its cell alone.
        unfinished: messages queued or being handled.
        idle_event: set while `unfinished` is 0.
        evicted: agent instances evicted so far.

    The runtime's delivery path reads `running` and `epoch` and updates `unfinished` and
    `idle_event` directly, without a call: it does so once per delivery.
    """

    _known_types: Container[str]
    _start_drain: Callable[[Cell], None]
    _get_agent: Callable[[AgentId], Awaitable[Agent]]
    _get_agent_of: Callable[[Cell], Awaitable[Agent]]
    _cell_dropped: Callable[[Cell], None]

    def __init__(
        self,
        cells: dict[AgentId, Cell],
        failures: DeliveryFailures,
        *,
        idle_timeout: float | None,
        store: AgentStateStore,
    ) -> None:
        self._cells = cells
        self._failures = failures
        self._undeliverable = failures.undeliverable
        self.running = False
        self.epoch = 0
        self.unfinished = 0
        self.idle_event = asyncio.Event()
        self.idle_event.set()
        self._store = store
        self._idle_list = IdleList(idle_timeout, self._evict_due) if idle_timeout is not None else None
        self._evictions: set[asyncio.Task[int]] = set()
        self._closed = False
        self.evicted = 0

    def connect(
        self,
        *,
        known_types: Container[str],
        start_drain: Callable[[Cell], None],
        get_agent: Callable[[AgentId], Awaitable[Agent]],
        get_agent_of: Callable[[Cell], Awaitable[Agent]],
        cell_dropped: Callable[[Cell], None],
    ) -> None:
        """Give the lifecycle the runtime's parts that hold it, once they are made.

        Args:
            known_types: the agent types registered (state for other types is skipped).
            start_drain: starts the drain task of a cell with queued messages.
            get_agent: the instance of an agent, created if need be.
            get_agent_of: the instance of a cell's agent, created if need be (every caller shares one creation).
            cell_dropped: told of each cell dropped from `cells` (its mailbox is held no longer).
        """
        self._known_types = known_types
        self._start_drain = start_drain
        self._get_agent = get_agent
        self._get_agent_of = get_agent_of
        self._cell_dropped = cell_dropped

    # -- counting ----------------------------------------------------------------------------------

    def message_finished(self) -> None:
        """One message fewer is queued or being handled."""
        self.unfinished -= 1
        if not self.unfinished:
            self.idle_event.set()

    @property
    def saved_states(self) -> int:
        """Agents out of memory whose saved state waits for their next message."""
        return len(self._store)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start delivering: a drain for every cell with queued messages, and the eviction timer."""
        if self.running:
            raise RuntimeError("Runtime is already started")
        if self._closed:
            raise RuntimeError("the runtime is closed: make a new one (its agents' state is in its store)")
        self.running = True
        self.epoch += 1
        for cell in list(self._cells.values()):
            if cell.queue and cell.task is None and not cell.evicting:
                self._start_drain(cell)
        if self._idle_list is not None:
            self._idle_list.start()

    async def idle(self) -> None:
        """Wait until nothing is queued or being handled (refused in the handler it would wait for)."""
        self._refuse_in_own_handler()
        while self.unfinished > 0:
            if not self.running:
                raise RuntimeError("the runtime is not started: queued messages wait for start()")
            await self.idle_event.wait()

    def _refuse_in_own_handler(self) -> None:
        try:
            agent_id = MessageHandlerContext.agent_id()
        except RuntimeError:
            return  # not in a handler
        cell = self._cells.get(agent_id)
        if cell is not None and cell.task is not None and cell.task is asyncio.current_task():
            raise RuntimeError(
                f"a handler of {agent_id} waited for the runtime to be idle, which includes its own message: "
                "it would wait forever (wait in a task the handler starts, or call stop())"
            )

    async def stop(self) -> None:
        """Stop now: cancel running handlers and report what was not handled."""
        if not self.running:
            raise RuntimeError("Runtime is not started")
        await self._halt()
        self._failures.raise_kept()

    async def stop_when_idle(self) -> None:
        """Stop once idle."""
        if not self.running:
            raise RuntimeError("Runtime is not started")
        await self.idle()
        await self._halt()
        self._failures.raise_kept()

    async def close(self) -> None:
        """Stop if running, save (into a durable store) and close every instance, close the store."""
        if self._closed:
            return
        self._closed = True
        failure: Exception | None = None
        if self.running:
            try:
                await self.stop()
            except Exception as exc:
                failure = exc  # raised at the end: the states must reach the store first
        try:
            durable = self._store.durable
            for cell in list(self._cells.values()):
                agent = cell.agent
                if agent is None:
                    continue
                if durable and _declares_state(agent) and getattr(agent, "evictable", True) is not False:
                    try:
                        self._store.put(cell.agent_id, await agent.save_state())
                    except Exception:
                        logger.warning("could not save the state of %s at close", cell.agent_id, exc_info=True)
                try:
                    await agent.close()
                except Exception:
                    logger.warning("closing %s failed", cell.agent_id, exc_info=True)
                cell.agent = None
            # Last, so that messages agents published while closing are reported too. Nothing will
            # ever run them (the runtime never ran, or was stopped and published to since).
            self._report_queued("the runtime closed before this message was handled")
        finally:
            self._store.close()
        if failure is not None:
            raise failure

    def _report_queued(self, why: str) -> None:
        """Report every queued message as undeliverable ([`RuntimeStoppedError`][aun_runtime.RuntimeStoppedError]); none is left."""
        for cell in list(self._cells.values()):
            while cell.queue:
                delivery = cell.queue.popleft()
                cell.mailbox.release()
                delivery.finished()
                self._undeliverable(cell.agent_id, delivery.message, RuntimeStoppedError(why))
            cell.queue = None
        self.unfinished = 0
        self.idle_event.set()

    async def _halt(self) -> None:
        self.running = False
        self.epoch += 1
        if self._idle_list is not None:
            self._idle_list.stop()
        cells = list(self._cells.values())
        for cell in cells:
            if cell.current is not None:
                cell.current.ctx.cancellation_token.cancel()
        tasks: list[asyncio.Task[Any]] = [cell.task for cell in cells if cell.task is not None]
        tasks += [cell.activation for cell in cells if cell.activation is not None]
        tasks += self._evictions
        # Called by a handler, stop() runs in that handler's drain: cancelling it would interrupt
        # this very stop. That handler goes on to its end (its message is reported below all the
        # same, and its drain then leaves the cell alone: the epoch has changed).
        this = asyncio.current_task()
        tasks = [task for task in tasks if task is not this]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE)
            if pending:
                logger.error("%d handlers ignored cancellation at stop; left running", len(pending))
        # Read the cells again: while the handlers wound down, they (or any other task) may have
        # published to agents that had no cell yet. Those messages are reported too, or they would
        # stay queued while no longer counted.
        for cell in list(self._cells.values()):
            cell.task = None
            cell.evicting = False
            interrupted, cell.current = cell.current, None
            if interrupted is not None:
                cell.mailbox.release()
                self._undeliverable(
                    cell.agent_id,
                    interrupted.message,
                    RuntimeStoppedError("the runtime stopped while this message was being handled"),
                )
        self._report_queued("the runtime stopped before this message was handled")

    # -- eviction ----------------------------------------------------------------------------------

    def went_idle(self, cell: Cell) -> None:
        """`cell` has nothing queued or running: list it for eviction, or drop it if it has no instance."""
        if cell.agent is None:
            # Its instance could not be created (the messages were reported): nothing would ever
            # evict the cell, so it goes now, unless something is still on its way to it.
            if cell.quiet() and self._cells.get(cell.agent_id) is cell:
                self._drop(cell)
        elif self._idle_list is not None and not cell.resident:
            self._idle_list.add(cell)

    def _drop(self, cell: Cell) -> None:
        del self._cells[cell.agent_id]
        self._cell_dropped(cell)

    def idle_list_discard(self, cell: Cell) -> None:
        """`cell` is busy again: off the idle list."""
        if self._idle_list is not None:
            self._idle_list.discard(cell)

    def _evict_due(self, cells: list[Cell]) -> None:
        task = asyncio.get_running_loop().create_task(self._evict_all(cells))
        self._evictions.add(task)
        task.add_done_callback(self._evictions.discard)

    async def _evict_all(self, cells: list[Cell]) -> int:
        evicted = 0
        for n, cell in enumerate(cells, 1):
            evicted += await self._evict(cell)
            if n % EVICTION_BATCH == 0:
                await asyncio.sleep(0)
        return evicted

    async def evict_idle(self, older_than: float = 0.0) -> int:
        """Evict now every instance idle for at least `older_than` seconds; returns how many."""
        if self._idle_list is not None:
            cells = self._idle_list.due(asyncio.get_running_loop().time(), older_than)
        else:
            cells = [cell for cell in self._cells.values() if cell.agent is not None and cell.quiet()]
        return await self._evict_all(cells)

    async def _evict(self, cell: Cell) -> bool:
        agent = cell.agent
        if (
            agent is None
            or cell.resident
            or cell.evicting
            or not cell.quiet()
            or self._cells.get(cell.agent_id) is not cell
            or getattr(agent, "evictable", True) is False
        ):
            return False
        touched = cell.touched
        cell.evicting = True
        try:
            try:
                state = await agent.save_state() if _declares_state(agent) else None
                if cell.touched != touched or not cell.quiet():
                    return False  # a message or a caller came meanwhile: it stays
                if state is not None:
                    self._store.put(cell.agent_id, state)
            except Exception:
                logger.warning("could not save %s to evict it; it stays in memory", cell.agent_id, exc_info=True)
                return False
            # From here on the instance is gone, whatever arrives: a new one gets the state.
            cell.agent = None
            self.evicted += 1
            try:
                await agent.close()
            except Exception:
                logger.warning("closing evicted %s failed", cell.agent_id, exc_info=True)
            # A caller may have made a new instance in this cell while the old one closed: it
            # holds the state just saved, so the cell stays with it.
            if cell.agent is None and cell.quiet() and self._cells.get(cell.agent_id) is cell:
                self._drop(cell)
            return True
        finally:
            cell.evicting = False
            if cell.queue and cell.task is None and self.running:
                self._start_drain(cell)
            elif cell.agent is not None and cell.quiet():
                self.went_idle(cell)

    # -- state -------------------------------------------------------------------------------------

    async def restore(self, agent_id: AgentId, agent: Agent) -> None:
        """Load the state saved for `agent_id` into its new instance (kept if loading fails)."""
        state = self._store.take(agent_id)
        if state is not None:
            try:
                await agent.load_state(state)
            except BaseException:
                self._store.put(agent_id, state)  # not lost: the next attempt gets it again
                raise

    async def save_state(self) -> Mapping[str, Any]:
        """The agents' own state (instances in memory and evicted ones); queued messages are not in it."""
        state: dict[str, Any] = {}
        # Each await lets agents be evicted and made again, out of the store into a new cell, behind
        # this walk: walk again over what is not covered yet until a walk awaits nothing, so the
        # instances and the store are read at one moment and no agent falls between them.
        while todo := [
            cell
            for agent_id, cell in self._cells.items()
            if str(agent_id) not in state and (cell.agent is not None or cell.activation is not None)
        ]:
            for cell in todo:
                if self._cells.get(cell.agent_id) is not cell or (cell.agent is None and cell.activation is None):
                    continue  # evicted meanwhile (its state is in the store) or replaced: next walk
                try:
                    agent = await self._get_agent_of(cell)  # an instance being created: its state
                except Exception:
                    continue  # its creation failed and put the state it took back into the store
                state[str(cell.agent_id)] = dict(await agent.save_state())
        for agent_id, saved in self._store.items():
            state.setdefault(str(agent_id), dict(saved))
        return state

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Load agents' state: into instances in memory now, into the others when they are created."""
        for key, agent_state in state.items():
            agent_id = AgentId.from_str(key)
            if agent_id.type not in self._known_types:
                continue  # as autogen-core: state of unknown agent types is skipped
            await self._load(agent_id, agent_state)

    async def agent_save_state(self, agent: AgentId) -> Mapping[str, Any]:
        cell = self._cells.get(agent)
        if cell is not None and cell.agent is not None:
            return await cell.agent.save_state()
        saved = self._store.peek(agent)
        if saved is not None:
            return saved
        return await (await self._get_agent(agent)).save_state()

    async def agent_load_state(self, agent: AgentId, state: Mapping[str, Any]) -> None:
        if agent.type not in self._known_types:
            raise LookupError(f"Agent with name {agent.type} not found.")
        await self._load(agent, state)

    async def _load(self, agent_id: AgentId, state: Mapping[str, Any]) -> None:
        cell = self._cells.get(agent_id)
        if cell is None or (cell.agent is None and cell.activation is None):
            self._store.put(agent_id, state)  # the next instance loads it
            return
        # Through the cell, as any caller: an eviction saving the instance meanwhile backs off (it
        # would store the old state and drop this instance), and an instance being created, which
        # has already taken the old state from the store, gets this one once it exists.
        try:
            agent = await self._get_agent_of(cell)
        except Exception:
            # Its creation failed (whoever started it was told): the next instance loads this state.
            self._store.put(agent_id, state)
            return
        await agent.load_state(state)
