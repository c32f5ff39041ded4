"""The conformance suite runs unchanged on every runtime kind listed here.

The archive is SQLite for every kind, and PostgreSQL for `single-threaded-postgresql` (a database
per test): the rules hold on both stores. (A durable worker's AIDs stay its own after it stops, so
a worker kind on PostgreSQL would need a host per test; workers on PostgreSQL are tested in
tests/distributed.)

A kind is a function that builds an :class:`AUNRuntime` from keyword options, and its core from
``core_options`` (the core's own constructor arguments, e.g. ``intervention_handlers``). Tests only
use the public API, so adding a kind (another core, a worker runtime) is the only change needed to
hold it to the same rules.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from aun_runtime import AUNActorRuntime, AUNCore, AUNRuntime, AUNSingleThreadedRuntime
from aun_runtime.distributed import WorkerRuntime, worker_runtime

RuntimeFactory = Callable[..., Awaitable[AUNRuntime]]
CoreFactory = Callable[..., Awaitable[AUNCore]]


def _single_threaded(core_options: dict[str, Any], **options: Any) -> AUNRuntime:
    return AUNRuntime(core=AUNSingleThreadedRuntime(**core_options), **options)


def _grpc_worker(host: str, core_options: dict[str, Any], **options: Any) -> AUNRuntime:
    """A worker of a host running in its own process (one host for the whole session)."""
    return worker_runtime(host, **core_options, **options)


_grpc_worker.needs_host = True  # type: ignore[attr-defined]


def _single_threaded_postgresql(core_options: dict[str, Any], postgres_url: str, **options: Any) -> AUNRuntime:
    """One process, its archive in a PostgreSQL database."""
    return AUNRuntime(core=AUNSingleThreadedRuntime(**core_options), archive=postgres_url, **options)


_single_threaded_postgresql.needs_postgres = True  # type: ignore[attr-defined]


def _actor(core_options: dict[str, Any], **options: Any) -> AUNRuntime:
    return AUNRuntime(core=AUNActorRuntime(**core_options), **options)


RUNTIME_KINDS: dict[str, Callable[..., AUNRuntime]] = {
    "single-threaded": _single_threaded,
    "grpc-worker": _grpc_worker,
    "actor": _actor,
    "single-threaded-postgresql": _single_threaded_postgresql,
}


@pytest.fixture(scope="session")
def grpc_host() -> Iterator[str]:
    """An ``aun-runtime host`` process on a free loopback port, killed after the session."""
    from tests.distributed.processes import start_host

    process, address = start_host()
    yield address
    process.kill()


@pytest.fixture(params=sorted(RUNTIME_KINDS))
async def make_runtime(request: pytest.FixtureRequest) -> AsyncIterator[RuntimeFactory]:
    """``runtime = await make_runtime(max_hops=4)``: a runtime of the kind under test, stopped after.

    ``core_options={...}`` go to its core (``intervention_handlers``, ``tracer_provider``).
    """
    build = RUNTIME_KINDS[request.param]
    kind = RUNTIME_KINDS[request.param]
    if getattr(kind, "needs_postgres", False):
        build = functools.partial(build, postgres_url=request.getfixturevalue("postgres_url"))
    if getattr(kind, "needs_host", False):
        build = functools.partial(build, request.getfixturevalue("grpc_host"))
    made: list[AUNRuntime] = []

    async def make(core_options: dict[str, Any] | None = None, **options: Any) -> AUNRuntime:
        runtime = build(core_options or {}, **options)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()


def _worker_core(host: str, **core_options: Any) -> AUNCore:
    return WorkerRuntime(host, **core_options)


_worker_core.needs_host = True  # type: ignore[attr-defined]

#: The same kinds, as bare cores: for tests of autogen-core's own API (agents, subscriptions,
#: publish_message) on each, with no AUN runtime above.
CORE_KINDS: dict[str, Callable[..., AUNCore]] = {
    "single-threaded": AUNSingleThreadedRuntime,
    "grpc-worker": _worker_core,
    "actor": AUNActorRuntime,
}


@pytest.fixture(params=sorted(CORE_KINDS))
async def make_core(request: pytest.FixtureRequest) -> AsyncIterator[CoreFactory]:
    """``core = await make_core(tracer_provider=...)``: a bare core of the kind under test, not
    started (``await start(core)``), closed after."""
    build = CORE_KINDS[request.param]
    if getattr(build, "needs_host", False):
        build = functools.partial(build, request.getfixturevalue("grpc_host"))
    made: list[AUNCore] = []

    async def make(**core_options: Any) -> AUNCore:
        core = build(**core_options)
        made.append(core)
        return core

    yield make
    for core in made:
        await core.close()


async def start(core: AUNCore) -> None:
    """Start a core: in-process cores start at once, a worker's start connects (so it is awaited)."""
    started = core.start()
    if started is not None:
        await started
