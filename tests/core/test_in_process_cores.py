"""What both in-process cores share with autogen-core's own runtime: its constructor arguments, with
the same meaning. ``ignore_unhandled_exceptions=False`` raises, from ``stop_when_idle``, the first
failure of a handler or of an agent's creation; ``tracer_provider`` falls back to the global one."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from autogen_core import AgentId, MessageContext, RoutedAgent, TopicId, TypeSubscription, event
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aun_runtime import AgentCreationError, AUNActorRuntime, AUNSingleThreadedRuntime

CORES = [AUNActorRuntime, AUNSingleThreadedRuntime]
#: Seconds a run may take here before it counts as hanging.
RUN_LIMIT = 20.0


@dataclass
class Note:
    n: int


class Sink(RoutedAgent):
    def __init__(self, fail_on: int | None = None) -> None:
        super().__init__("keeps notes")
        self.fail_on = fail_on
        self.notes: list[int] = []

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        if message.n == self.fail_on:
            raise ValueError(f"note {message.n} is bad")
        self.notes.append(message.n)


async def _run(core: Any, *notes: int) -> None:
    core.start()
    for n in notes:
        await core.publish_message(Note(n), TopicId("notes", "default"))
    await asyncio.wait_for(core.stop_when_idle(), RUN_LIMIT)


@pytest.mark.parametrize("core_class", CORES)
async def test_a_factory_that_raises_is_raised_at_stop_when_not_ignored(core_class: type[Any]) -> None:
    core = core_class(ignore_unhandled_exceptions=False)

    def broken() -> Sink:
        raise ValueError("cannot make it")

    await Sink.register(core, "broken", broken)
    await Sink.register(core, "fine", lambda: Sink())
    for agent_type in ("broken", "fine"):
        await core.add_subscription(TypeSubscription("notes", agent_type))

    with pytest.raises(ValueError, match="cannot make it"):
        await _run(core, 1)
    fine = await core.try_get_underlying_agent_instance(AgentId("fine", "default"), Sink)
    assert fine.notes == [1]  # the other recipient had it all the same
    await core.close()


@pytest.mark.parametrize("core_class", CORES)
async def test_an_instance_only_type_published_to_under_a_new_key_raises_a_runtime_error_at_stop(
    core_class: type[Any],
) -> None:
    core = core_class(ignore_unhandled_exceptions=False)
    await Sink().register_instance(core, AgentId("sink", "default"))
    await core.add_subscription(TypeSubscription("notes", "sink"))
    core.start()
    await core.publish_message(Note(1), TopicId("notes", "elsewhere"))  # key "elsewhere": no instance

    with pytest.raises(AgentCreationError, match="registered instances") as raised:
        await asyncio.wait_for(core.stop_when_idle(), RUN_LIMIT)
    assert isinstance(raised.value, RuntimeError)  # what autogen-core raises there
    await core.close()


@pytest.mark.parametrize("core_class", CORES)
async def test_a_handler_that_raises_is_raised_at_stop_when_not_ignored(core_class: type[Any]) -> None:
    core = core_class(ignore_unhandled_exceptions=False)
    await Sink.register(core, "sink", lambda: Sink(fail_on=2))
    await core.add_subscription(TypeSubscription("notes", "sink"))

    with pytest.raises(ValueError, match="note 2 is bad"):
        await _run(core, 1, 2)
    await core.close()


@pytest.mark.parametrize("core_class", CORES)
async def test_with_failures_ignored_nothing_is_raised_and_the_failure_is_reported(core_class: type[Any]) -> None:
    core = core_class()
    reported: list[tuple[AgentId, Any, str]] = []
    core.attach(on_undeliverable=lambda agent, message, error: reported.append((agent, message, str(error))))

    def broken() -> Sink:
        raise ValueError("cannot make it")

    await Sink.register(core, "broken", broken)
    await core.add_subscription(TypeSubscription("notes", "broken"))
    await _run(core, 5)

    assert reported == [(AgentId("broken", "default"), Note(5), "cannot make it")]
    await core.close()


@pytest.mark.parametrize("core_class", CORES)
async def test_a_hook_that_raises_is_logged_and_the_other_recipients_still_get_the_message(
    core_class: type[Any], caplog: pytest.LogCaptureFixture
) -> None:
    core = core_class()

    def hook(agent: AgentId, message: Any, error: BaseException) -> None:
        raise OSError("the archive is unavailable")

    def broken() -> Sink:
        raise ValueError("cannot make it")

    core.attach(on_undeliverable=hook)
    await Sink.register(core, "broken", broken)
    await Sink.register(core, "fine", lambda: Sink())
    for agent_type in ("broken", "fine"):
        await core.add_subscription(TypeSubscription("notes", agent_type))
    with caplog.at_level(logging.ERROR, logger="aun_runtime"):
        await _run(core, 1, 2)

    fine = await core.try_get_underlying_agent_instance(AgentId("fine", "default"), Sink)
    assert fine.notes == [1, 2]
    hook_errors = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], OSError)]
    assert [r.getMessage() for r in hook_errors] == [
        "on_undeliverable raised while reporting a Note for broken/default (cannot make it)"
    ] * 2
    await core.close()


@pytest.mark.parametrize("core_class", CORES)
async def test_without_a_tracer_provider_the_installed_sdk_provider_is_followed(
    core_class: type[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What opentelemetry.trace.set_tracer_provider installs, without installing it for the whole
    # test session (it can be set once per process).
    import autogen_core._telemetry._tracing as autogen_tracing

    import aun_runtime.core._actor_tracing as our_tracing

    exporter = InMemorySpanExporter()
    installed = TracerProvider()
    installed.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(our_tracing, "get_tracer_provider", lambda: installed)
    monkeypatch.setattr(autogen_tracing, "get_tracer_provider", lambda: installed)

    core = core_class()
    await Sink.register(core, "sink", lambda: Sink())
    await core.add_subscription(TypeSubscription("notes", "sink"))
    await _run(core, 1)

    assert "autogen process sink.(default)-A" in {s.name for s in exporter.get_finished_spans()}
    await core.close()
