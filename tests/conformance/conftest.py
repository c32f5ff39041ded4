"""The conformance suite runs unchanged on every runtime kind listed here.

A kind is a function that builds a started :class:`AUNRuntime` from keyword options. Tests only use
the public API, so adding a kind (another core, a worker runtime) is the only change needed to hold
it to the same rules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from aun_runtime import AUNActorRuntime, AUNRuntime, AUNSingleThreadedRuntime

RuntimeFactory = Callable[..., Awaitable[AUNRuntime]]


def _single_threaded(**options: Any) -> AUNRuntime:
    return AUNRuntime(core=AUNSingleThreadedRuntime(), **options)


RUNTIME_KINDS: dict[str, Callable[..., AUNRuntime]] = {
    "single-threaded": _single_threaded,
    "actor": lambda **options: AUNRuntime(core=AUNActorRuntime(), **options),
}


@pytest.fixture(params=sorted(RUNTIME_KINDS))
async def make_runtime(request: pytest.FixtureRequest) -> AsyncIterator[RuntimeFactory]:
    """``runtime = await make_runtime(max_hops=4)``: a runtime of the kind under test, stopped after."""
    build = RUNTIME_KINDS[request.param]
    made: list[AUNRuntime] = []

    async def make(**options: Any) -> AUNRuntime:
        runtime = build(**options)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()
