"""The single-threaded core: its publish path relies on internals of the pinned autogen-core."""

from __future__ import annotations

import autogen_core
from autogen_core import SingleThreadedAgentRuntime
from opentelemetry.trace import NoOpTracerProvider

from aun_runtime import AUNRuntime, AUNSingleThreadedRuntime
from aun_runtime.testing import Recorder


def test_the_pinned_autogen_core_internals_the_lean_path_uses_are_there() -> None:
    # If this fails after an upgrade, the publish path in aun_runtime/core/_single_threaded.py must be revisited.
    assert autogen_core.__version__ == "0.7.5"
    runtime = SingleThreadedAgentRuntime()
    for name in (
        "_message_queue",
        "_subscription_manager",
        "_background_exception",
        "_ignore_unhandled_handler_exceptions",
        "_instantiated_agents",
        "_agent_factories",
        "_agent_instance_types",
        "_tracer_helper",
    ):
        assert hasattr(runtime, name), name
    for name in ("_get_agent", "_process_publish", "_try_serialize", "_create_otel_attributes"):
        assert callable(getattr(runtime, name)), name


async def test_with_a_tracer_provider_publishes_take_autogen_cores_traced_path() -> None:
    core = AUNSingleThreadedRuntime(tracer_provider=NoOpTracerProvider())
    runtime = AUNRuntime(core=core)
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    await runtime.send("rec.local", "traced")
    await runtime.settle()

    recorder = await runtime.agent_instance("rec.local", Recorder)
    assert [m.text for m in recorder.received] == ["traced"]
    assert core._lean is False
    await runtime.close()
