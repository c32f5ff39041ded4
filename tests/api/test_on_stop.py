"""``runtime.on_stop``: what an application ties to its run is released however the run stops,
after the last turn, once, last registered first; a callback that raises or hangs stops nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from aun_runtime import AUNRuntime
from aun_runtime.testing import Stuck


async def _by_stop(runtime: AUNRuntime) -> None:
    await runtime.stop()


async def _by_stop_when_idle(runtime: AUNRuntime) -> None:
    await runtime.stop_when_idle()


async def _by_close(runtime: AUNRuntime) -> None:
    await runtime.close()


@pytest.mark.parametrize("ending", [_by_stop, _by_stop_when_idle, _by_close])
async def test_callbacks_run_once_last_registered_first(ending: Callable[[AUNRuntime], Awaitable[None]]) -> None:
    runtime = AUNRuntime()
    calls: list[str] = []

    async def close_pool() -> None:
        calls.append("pool")

    runtime.on_stop(close_pool)
    runtime.on_stop(lambda: calls.append("client"))  # a plain function will do too
    await runtime.start()
    await ending(runtime)
    assert calls == ["client", "pool"]
    await runtime.close()  # a second stop finds nothing left to run
    assert calls == ["client", "pool"]


async def test_leaving_async_with_on_an_error_runs_them() -> None:
    calls: list[str] = []
    with pytest.raises(RuntimeError, match="the app broke"):
        async with AUNRuntime() as runtime:
            runtime.on_stop(lambda: calls.append("released"))
            raise RuntimeError("the app broke")
    assert calls == ["released"]


async def test_they_run_after_the_last_turn() -> None:
    seen: list[int] = []
    async with AUNRuntime(handler_timeout=None) as runtime:
        await runtime.register_agent("stuck.local", Stuck)
        inbox = await runtime.open_inbox()
        stuck = await runtime.agent_instance("stuck.local", Stuck)
        runtime.on_stop(lambda: seen.append(stuck.hanging))
        await inbox.send("stuck.local", "hang")
        for _ in range(100):
            if stuck.hanging:
                break
            await asyncio.sleep(0.01)
        await runtime.stop(grace=0.1)
    assert seen == [0]  # the stuck turn had been cut off by then: nothing still used what it releases


async def test_one_that_raises_or_hangs_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    runtime = AUNRuntime()
    calls: list[str] = []

    def broken() -> None:
        raise OSError("the pool was gone already")

    async def hangs() -> None:
        await asyncio.Event().wait()

    runtime.on_stop(lambda: calls.append("first"))
    runtime.on_stop(broken)
    runtime.on_stop(hangs, timeout=0.1)
    await runtime.start()
    with caplog.at_level(logging.ERROR, logger="aun_runtime"):
        await asyncio.wait_for(runtime.stop(), 5)
    assert calls == ["first"]
    messages = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert any("hangs took more than 0.1 s: cancelled" in text for text, _ in messages)
    assert any("broken raised" in text and traceback for text, traceback in messages)


def test_what_is_not_a_callback_is_refused() -> None:
    runtime = AUNRuntime()
    with pytest.raises(TypeError, match="on_stop needs a callable"):
        runtime.on_stop("workbench.stop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        runtime.on_stop(lambda: None, timeout=0)
