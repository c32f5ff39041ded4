"""Agents' state while the runtime awaits an agent: an eviction, a load, a save or a close that
meets a caller half-way keeps the newest state and loses no agent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from autogen_core import AgentId, MessageContext, RoutedAgent, TopicId, TypeSubscription, event

from aun_runtime import AUNActorRuntime, RuntimeStoppedError, SQLiteStateStore

A = AgentId("a", "default")


@dataclass
class Add:
    n: int


class Gate:
    """Holds an agent method until the test lets it go, and tells the test when it got there."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def hold(self) -> None:
        self.entered.set()
        await self.release.wait()


@dataclass
class Gates:
    """The gates an agent passes through; a test sets the one it needs."""

    save: Gate | None = None
    load: Gate | None = None
    close: Gate | None = None
    made: int = 0
    closed: int = 0
    close_error: Exception | None = None
    failures: list[int] = field(default_factory=list)


class Keeper(RoutedAgent):
    """Keeps every number it was given; its state is that list."""

    def __init__(self, gates: Gates) -> None:
        super().__init__("keeps")
        gates.made += 1
        self.gates = gates
        self.seen: list[int] = []

    @event
    async def on_add(self, message: Add, ctx: MessageContext) -> None:
        self.seen.append(message.n)
        if message.n in self.gates.failures:
            raise ValueError(f"refused {message.n}")

    async def save_state(self) -> Mapping[str, Any]:
        snapshot = {"seen": list(self.seen)}
        if self.gates.save is not None:
            await self.gates.save.hold()
        return snapshot

    async def load_state(self, state: Mapping[str, Any]) -> None:
        if self.gates.load is not None:
            await self.gates.load.hold()
        self.seen = list(state["seen"])

    async def close(self) -> None:
        self.gates.closed += 1
        if self.gates.close is not None:
            await self.gates.close.hold()
        if self.gates.close_error is not None:
            raise self.gates.close_error


async def _runtime(gates: Gates, agent_type: str = "a", **options: Any) -> AUNActorRuntime:
    runtime = AUNActorRuntime(idle_timeout=None, **options)
    await runtime.register_factory(agent_type, lambda: Keeper(gates))
    await runtime.add_subscription(TypeSubscription(agent_type, agent_type))
    return runtime


async def _add(runtime: AUNActorRuntime, *numbers: int, key: str = "default", topic: str = "a") -> None:
    for n in numbers:
        await runtime.publish_message(Add(n), TopicId(topic, key))


async def _keeper(runtime: AUNActorRuntime, agent_id: AgentId = A) -> Keeper:
    return await runtime.try_get_underlying_agent_instance(agent_id, Keeper)


# -- eviction -------------------------------------------------------------------------------------


async def test_an_instance_made_while_the_evicted_one_closes_keeps_its_cell_and_state() -> None:
    gates = Gates()
    runtime = await _runtime(gates)
    runtime.start()
    await _add(runtime, 1)
    await runtime.idle()
    first = await _keeper(runtime)
    gate = gates.close = Gate()
    eviction = asyncio.create_task(runtime.evict_idle())
    await gate.entered.wait()
    gates.close = None

    again = await _keeper(runtime)  # made from the state the eviction just saved
    assert again is not first and again.seen == [1]
    gate.release.set()
    assert await eviction == 1

    await _add(runtime, 2)
    await runtime.idle()
    assert await _keeper(runtime) is again
    assert again.seen == [1, 2] and gates.made == 2 and runtime.instances == 1
    await runtime.stop()


# -- load_state -----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["load_state", "agent_load_state"])
async def test_state_loaded_while_the_instance_is_saved_for_eviction_is_kept(how: str) -> None:
    gates = Gates()
    runtime = await _runtime(gates)
    runtime.start()
    await _add(runtime, 1)
    await runtime.idle()
    instance = await _keeper(runtime)
    gate = gates.save = Gate()
    eviction = asyncio.create_task(runtime.evict_idle())
    await gate.entered.wait()
    gates.save = None

    if how == "load_state":
        await runtime.load_state({str(A): {"seen": [42]}})
    else:
        await runtime.agent_load_state(A, {"seen": [42]})
    gate.release.set()
    assert await eviction == 0  # the load used the instance: it stays, with the loaded state
    assert await _keeper(runtime) is instance
    assert await runtime.agent_save_state(A) == {"seen": [42]}
    await runtime.stop()


@pytest.mark.parametrize("how", ["load_state", "agent_load_state"])
async def test_state_loaded_while_the_instance_is_created_is_applied_to_it(how: str) -> None:
    gates = Gates()
    runtime = await _runtime(gates)
    await runtime.load_state({str(A): {"seen": [1]}})
    gate = gates.load = Gate()
    creating = asyncio.create_task(_keeper(runtime))
    await gate.entered.wait()  # the old state is out of the store, being loaded
    gates.load = None

    if how == "load_state":
        loading = asyncio.create_task(runtime.load_state({str(A): {"seen": [42]}}))
    else:
        loading = asyncio.create_task(runtime.agent_load_state(A, {"seen": [42]}))
    await asyncio.sleep(0)  # let the load reach the instance being created
    gate.release.set()
    instance = await creating
    await loading

    assert instance.seen == [42]
    assert runtime.saved_states == 0  # nothing stale parked for a later instance
    assert await runtime.save_state() == {str(A): {"seen": [42]}}


# -- save_state -----------------------------------------------------------------------------------


async def test_save_state_covers_an_agent_evicted_and_made_again_while_it_runs() -> None:
    slow_gates, gates = Gates(), Gates()
    runtime = await _runtime(gates)
    await runtime.register_factory("slow", lambda: Keeper(slow_gates))
    runtime.start()
    slow = await _keeper(runtime, AgentId("slow", "default"))  # saved first: its cell is older
    slow.evictable = False  # type: ignore[attr-defined]
    await _add(runtime, 1)
    await runtime.idle()
    gate = slow_gates.save = Gate()
    saving = asyncio.create_task(runtime.save_state())
    await gate.entered.wait()

    assert await runtime.evict_idle() == 1  # "a" goes to the store ...
    await _add(runtime, 2)  # ... and comes back out of it into a new instance
    await runtime.idle()
    gate.release.set()

    assert await saving == {"slow/default": {"seen": []}, str(A): {"seen": [1, 2]}}
    await runtime.stop()


# -- close ----------------------------------------------------------------------------------------


async def test_close_saves_and_closes_everything_before_it_raises_a_handler_error(tmp_path: Path) -> None:
    gates = Gates(failures=[-1])
    path = tmp_path / "states.sqlite"
    runtime = await _runtime(gates, state_store=SQLiteStateStore(path), ignore_unhandled_exceptions=False)
    runtime.start()
    for key in ("k0", "k1", "k2"):
        await _add(runtime, 1, key=key)
    await runtime.idle()
    assert await runtime.evict_idle() == 3  # their states wait in the store's deferred writes
    await _add(runtime, -1)
    await runtime.idle()

    with pytest.raises(ValueError, match="refused -1"):
        await runtime.close()

    again = SQLiteStateStore(path)
    assert len(again) == 4 and again.peek(A) == {"seen": [-1]}
    again.close()
    assert gates.closed == 4  # the three evicted and the one in memory at close


async def test_an_agent_whose_close_raises_is_logged_and_the_rest_still_closed_and_saved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad, gates = Gates(close_error=RuntimeError("close failed")), Gates()
    path = tmp_path / "states.sqlite"
    runtime = await _runtime(bad, agent_type="bad", state_store=SQLiteStateStore(path))
    await runtime.register_factory("a", lambda: Keeper(gates))
    await runtime.add_subscription(TypeSubscription("a", "a"))
    runtime.start()
    await runtime.get("bad", lazy=False)  # closed first: its cell is older
    await _add(runtime, 7)
    await runtime.idle()

    with caplog.at_level(logging.WARNING, logger="aun_runtime"):
        await runtime.close()

    assert "close failed" in caplog.text
    assert bad.closed == 1 and gates.closed == 1
    again = SQLiteStateStore(path)
    assert again.peek(A) == {"seen": [7]} and again.peek(AgentId("bad", "default")) == {"seen": []}
    again.close()


@pytest.mark.parametrize("started", [False, True])
async def test_close_reports_queued_messages_and_a_second_close_does_nothing(started: bool) -> None:
    gates = Gates()
    runtime = await _runtime(gates)
    reports: list[tuple[AgentId, Any, BaseException]] = []
    runtime.attach(on_undeliverable=lambda *report: reports.append(report))
    await runtime.get("a", lazy=False)
    if started:
        runtime.start()
        await runtime.stop()
    await _add(runtime, 1)  # queued: nothing runs it any more

    await runtime.close()
    assert [(agent_id, message) for agent_id, message, _ in reports] == [(A, Add(1))]
    assert isinstance(reports[0][2], RuntimeStoppedError)
    assert runtime.unprocessed_messages_count == 0 and runtime.mailbox(A) is not None
    mailbox = runtime.mailbox(A)
    assert mailbox is not None and mailbox.occupancy == 0

    await runtime.close()
    assert gates.closed == 1 and len(reports) == 1
    with pytest.raises(RuntimeError, match="closed"):
        runtime.start()  # a closed runtime's agents and store are gone: it does not run again


# -- cells ----------------------------------------------------------------------------------------


async def test_an_agent_whose_instance_could_not_be_made_leaves_no_cell_behind() -> None:
    gates = Gates()
    runtime = await _runtime(gates)
    broken = True

    def make() -> Keeper:
        if broken:
            raise RuntimeError("no model client")
        return Keeper(gates)

    await runtime.register_factory("flaky", make)
    await runtime.add_subscription(TypeSubscription("flaky", "flaky"))
    reports: list[tuple[AgentId, Any, BaseException]] = []
    runtime.attach(on_undeliverable=lambda *report: reports.append(report))
    runtime.start()
    for key in ("k0", "k1", "k2"):
        await _add(runtime, 1, key=key, topic="flaky")
    await runtime.idle()
    assert len(reports) == 3
    assert all(runtime.mailbox(AgentId("flaky", key)) is None for key in ("k0", "k1", "k2"))

    broken = False  # the next message tries again, in a new cell
    await _add(runtime, 2, key="k0", topic="flaky")
    await runtime.idle()
    assert (await _keeper(runtime, AgentId("flaky", "k0"))).seen == [2]
    await runtime.stop()
