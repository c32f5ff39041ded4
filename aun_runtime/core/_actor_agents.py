"""The agents of one actor runtime: what is registered, their cells, and making their instances.

`ActorAgents` keeps the factories and instances registered with an
[`AUNActorRuntime`][aun_runtime.AUNActorRuntime], makes the cell an agent gets when it is first used,
and creates an agent's instance when something needs it: one creation for every caller, which a
caller that gives up does not cancel for the others, and which loads the agent's saved state.
It is apart from the delivery path, which asks it only for a new cell
(`new_cell`) and for an instance when a drain starts (`get_agent_of`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Container
from typing import Any, NoReturn, cast

from autogen_core import Agent, AgentId, AgentInstantiationContext, AgentRuntime, AgentType

from ..base._errors import AgentCreationError, UndeliverableError
from ..delivery._core_protocol import MailboxProvider, MailboxReleasedHook
from ..delivery._mailbox import MailboxOptions
from ._actor_cell import Cell
from ._actor_failures import DeliveryFailures
from ._actor_lifecycle import ActorLifecycle

__all__ = ["ActorAgents"]

logger = logging.getLogger("aun_runtime")

_type_of = type  # the protocol's methods take a parameter named ``type``


class _Factory:
    """A factory that needs more than a plain call: two arguments (deprecated in autogen-core) or a
    class to check. A plain zero-argument factory is kept as it is (one object less per type)."""

    __slots__ = ("expected", "make", "takes_runtime")

    def __init__(self, make: Callable[..., Any], expected: type[Agent] | None, takes_runtime: bool) -> None:
        self.make = make
        self.expected = expected
        self.takes_runtime = takes_runtime


def _factory_entry(make: Callable[..., Any], expected: type[Agent] | None) -> Callable[..., Any] | _Factory:
    arity = len(inspect.signature(make).parameters)
    if arity not in (0, 2):
        raise ValueError("Agent factory must take 0 or 2 arguments.")
    if arity == 0 and expected is None:
        return make
    return _Factory(make, expected, arity == 2)


def _no_factory() -> NoReturn:
    # The marker of a type registered with instances; the runtime never calls it (see _cannot_create).
    raise RuntimeError(
        "an agent registered as an instance cannot be created by the runtime: register the instance "
        "under this AgentId before publishing to it"
    )


class ActorAgents:
    """The registered agent types and instances of one runtime, and the creation of their instances.

    Args:
        runtime: the runtime the agents are bound to (and made in the context of).
        cells: the runtime's cells, by agent (shared: cells are made here, dropped by the lifecycle).
        lifecycle: the runtime's lifecycle (the state a new instance loads; whether it was stopped).
        failures: where a message for an agent that cannot be created is reported.
        mailboxes: how the mailboxes of the cells made here are made, unless `mailbox_provider` gives one.

    Attributes:
        mailbox_provider: the facade's mailboxes, by agent (set by the runtime's `attach`).
        on_mailbox_released: told when a mailbox from `mailbox_provider` is held no longer.
    """

    def __init__(
        self,
        runtime: AgentRuntime,
        cells: dict[AgentId, Cell],
        lifecycle: ActorLifecycle,
        failures: DeliveryFailures,
        mailboxes: MailboxOptions,
    ) -> None:
        self._runtime = runtime
        self._cells = cells
        self._lifecycle = lifecycle
        self._failures = failures
        self._mailboxes = mailboxes
        self._factories: dict[str, Callable[..., Any] | _Factory] = {}
        self._instance_types: dict[str, type[Agent]] = {}
        # The factory registered last, with its class and entry: registering it again for the next
        # type (as an AUN runtime does for every AID of a class) reads no signature.
        self._last_factory: tuple[Callable[..., Any], type[Agent] | None, Callable[..., Any] | _Factory] | None = None
        self.mailbox_provider: MailboxProvider | None = None
        self.on_mailbox_released: MailboxReleasedHook | None = None

    @property
    def types(self) -> Container[str]:
        """The agent types registered, by factory or by instance."""
        return self._factories

    # -- registration ------------------------------------------------------------------------------

    def register_factory(
        self, agent_type: AgentType, agent_factory: Callable[..., Any], expected_class: type[Agent] | None
    ) -> None:
        """Register `agent_factory` for `agent_type` (a ValueError if the type is taken)."""
        if agent_type.type in self._factories:
            raise ValueError(f"Agent with type {agent_type} already exists.")
        last = self._last_factory
        if last is not None and last[0] is agent_factory and last[1] is expected_class:
            entry = last[2]  # the same factory again (an AUN runtime's, for each AID of a class)
        else:
            entry = _factory_entry(agent_factory, expected_class)  # reads its signature: costly
            self._last_factory = (agent_factory, expected_class, entry)
        self._factories[agent_type.type] = entry

    async def register_instance(self, agent_instance: Agent, agent_id: AgentId) -> None:
        """Bind `agent_instance` to `agent_id` for good (it is never evicted: nothing could make it again)."""
        cell = self._cells.get(agent_id)
        if cell is not None and cell.agent is not None:
            raise ValueError(f"Agent with id {agent_id} already exists.")
        known = self._instance_types.get(agent_id.type)
        if known is None:
            if agent_id.type in self._factories:
                raise ValueError("Agent factories and agent instances cannot be registered to the same type.")
            self._factories[agent_id.type] = _no_factory
            self._instance_types[agent_id.type] = _type_of(agent_instance)
        elif known is not _type_of(agent_instance):
            raise ValueError("Agent instances must be the same object type.")
        await agent_instance.bind_id_and_runtime(id=agent_id, runtime=self._runtime)
        cell = cell or self._make_cell(agent_id)
        cell.agent = agent_instance
        cell.resident = True  # its factory cannot re-create it: never evicted

    # -- cells -------------------------------------------------------------------------------------

    def new_cell(self, agent_id: AgentId, message: Any = None) -> Cell | None:
        """A cell for an agent the runtime can create; else `message` is reported (and the
        failure kept, as a factory's would be), and None."""
        error = self._cannot_create(agent_id)
        if error is not None:
            self._failures.keep(error)
            self._failures.undeliverable(agent_id, message, error)
            return None
        return self._make_cell(agent_id)

    def cell_dropped(self, cell: Cell) -> None:
        """`cell` is gone from memory: its mailbox, if the facade's, is held here no longer."""
        released = self.on_mailbox_released
        if released is not None:
            released(cell.agent_id, cell.mailbox)

    def _cannot_create(self, agent_id: AgentId) -> AgentCreationError | None:
        factory = self._factories.get(agent_id.type)
        if factory is None:
            return AgentCreationError.unregistered(agent_id, agent_id.type)
        if factory is _no_factory:
            return AgentCreationError.instances_only(agent_id, agent_id.type)
        return None

    def _make_cell(self, agent_id: AgentId) -> Cell:
        mailbox = self.mailbox_provider(agent_id) if self.mailbox_provider is not None else None
        cell = Cell(agent_id, mailbox or self._mailboxes.mailbox())
        self._cells[agent_id] = cell
        return cell

    # -- instances ---------------------------------------------------------------------------------

    async def get_agent(self, agent_id: AgentId) -> Agent:
        """The instance of `agent_id`, created if need be (a LookupError if it cannot be)."""
        cell = self._cells.get(agent_id)
        if cell is None:
            error = self._cannot_create(agent_id)
            if error is not None:
                raise LookupError(f"Agent with name {agent_id.type} not found: {error}.")
            cell = self._make_cell(agent_id)
        agent = await self.get_agent_of(cell)
        if cell.task is None and not cell.queue and not cell.idle_listed:
            self._lifecycle.went_idle(cell)
        return agent

    async def get_agent_of(self, cell: Cell) -> Agent:
        """The instance of `cell`'s agent, created if need be; every caller shares one creation."""
        cell.touched += 1  # an eviction in progress keeps the instance: someone is using it
        while cell.agent is None:
            activation = cell.activation
            if activation is None:
                # A task of its own that every caller awaits through a shield, so that a caller
                # that gives up (a wait_for that timed out, a stopped drain) does not cancel it
                # for the others. Only stop() cancels it.
                activation = cell.activation = asyncio.get_running_loop().create_task(self._activate(cell))
            epoch = self._lifecycle.epoch
            try:
                return await asyncio.shield(activation)
            except asyncio.CancelledError:
                this = asyncio.current_task()
                if not activation.cancelled() or (this is not None and this.cancelling()):
                    raise  # this caller was cancelled
                if self._lifecycle.epoch == epoch:  # the factory itself raised CancelledError
                    raise UndeliverableError(f"creating {cell.agent_id} was cancelled") from None
                # stop() cancelled the activation, not this caller, who still wants the agent.
        return cell.agent

    async def _activate(self, cell: Cell) -> Agent:
        try:
            agent = await self._instantiate(cell.agent_id)
        finally:
            if cell.activation is asyncio.current_task():
                cell.activation = None
        cell.agent = agent
        return agent

    async def _instantiate(self, agent_id: AgentId) -> Agent:
        entry = self._factories[agent_id.type]
        factory = entry if isinstance(entry, _Factory) else None
        with AgentInstantiationContext.populate_context((self._runtime, agent_id)):
            try:
                if factory is None:
                    made = cast(Callable[[], Any], entry)()
                else:
                    made = factory.make(self._runtime, agent_id) if factory.takes_runtime else factory.make()
                agent = cast(Agent, await made if inspect.isawaitable(made) else made)
            except Exception:  # not CancelledError: stop() interrupting a slow factory is no error
                # autogen-core's wording, which log filters (and its tests) match.
                logger.error("Error constructing agent %s", agent_id, exc_info=True)
                raise
        try:
            if factory is not None and factory.expected is not None and not issubclass(_type_of(agent), factory.expected):
                raise ValueError(
                    f"Factory registered using the wrong type: expected {factory.expected.__name__}, "
                    f"got {_type_of(agent).__name__}"
                )
            await self._lifecycle.restore(agent_id, agent)
        except BaseException:
            # This instance will never be used (of the wrong class, or its state did not load): close
            # it, as an evicted one is, so that whatever it opened is released.
            try:
                await agent.close()
            except Exception:
                logger.warning("closing %s, which could not be used, failed", agent_id, exc_info=True)
            raise
        return agent
