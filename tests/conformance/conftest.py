"""The conformance suite runs unchanged on every runtime kind listed here.

The archive is SQLite for every kind, and PostgreSQL for `single-threaded-postgresql` (a database
per test): the rules hold on both stores. (A durable worker's AIDs stay its own after it stops, so
a worker kind on PostgreSQL would need a host per test; workers on PostgreSQL are tested in
tests/distributed.)

A kind is a function that builds a started :class:`AUNRuntime` from keyword options. Tests only use
the public API, so adding a kind (another core, a worker runtime) is the only change needed to hold
it to the same rules.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from aun_runtime import AUNActorRuntime, AUNRuntime, AUNSingleThreadedRuntime
from aun_runtime.distributed import worker_runtime

RuntimeFactory = Callable[..., Awaitable[AUNRuntime]]


def _single_threaded(**options: Any) -> AUNRuntime:
    return AUNRuntime(core=AUNSingleThreadedRuntime(), **options)


def _grpc_worker(host: str, **options: Any) -> AUNRuntime:
    """A worker of a host running in its own process (one host for the whole session)."""
    return worker_runtime(host, **options)


_grpc_worker.needs_host = True  # type: ignore[attr-defined]


def _single_threaded_postgresql(postgres_url: str, **options: Any) -> AUNRuntime:
    """One process, its archive in a PostgreSQL database."""
    return AUNRuntime(core=AUNSingleThreadedRuntime(), archive=postgres_url, **options)


_single_threaded_postgresql.needs_postgres = True  # type: ignore[attr-defined]

RUNTIME_KINDS: dict[str, Callable[..., AUNRuntime]] = {
    "single-threaded": _single_threaded,
    "grpc-worker": _grpc_worker,
    "single-threaded-postgresql": _single_threaded_postgresql,
    "actor": lambda **options: AUNRuntime(core=AUNActorRuntime(), **options),
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
    """``runtime = await make_runtime(max_hops=4)``: a runtime of the kind under test, stopped after."""
    build = RUNTIME_KINDS[request.param]
    kind = RUNTIME_KINDS[request.param]
    if getattr(kind, "needs_postgres", False):
        build = functools.partial(build, postgres_url=request.getfixturevalue("postgres_url"))
    if getattr(kind, "needs_host", False):
        build = functools.partial(build, request.getfixturevalue("grpc_host"))
    made: list[AUNRuntime] = []

    async def make(**options: Any) -> AUNRuntime:
        runtime = build(**options)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()
