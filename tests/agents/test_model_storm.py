"""A rate-limit storm is ridden out together: one endpoint, one limiter, every question answered once.

Twenty `AutonomousAgent`s share one OpenAI-compatible endpoint on loopback that answers 429
(`Retry-After: 2`) to everything for the first `STORM` seconds, as a hosted API does when all of a
process's agents ask at once. Before the limiter, each agent retried once on its own clock and all
twenty questions became dead letters.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNRuntime, RecordKind
from aun_runtime.models import ModelConfig
from tests.models.model_shapes import asker
from tests.models.openai_stand_in import OpenAIStandIn, Reply, ToolCalls, openai_stand_in

AGENTS = 20
#: The storm's length, as the issue measured it on a hosted API's bad minute.
STORM = 15.0
RETRY_AFTER = 2.0
CONCURRENCY = 8


class Storm:
    """An endpoint that answers 429 to everything for `seconds`, then answers each asker with a reply."""

    def __init__(self, seconds: float, retry_after: float) -> None:
        self.seconds = seconds
        self.retry_after = retry_after
        self.started: float | None = None
        self.lock = threading.Lock()
        #: (asker, arrival, status, when the answer left)
        self.log: list[tuple[str, float, int, float]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        arrived = time.monotonic()
        with self.lock:
            if self.started is None:
                self.started = arrived
            raging = arrived - self.started < self.seconds
            who = asker(body)
            self.log.append((who, arrived, 429 if raging else 200, time.monotonic()))
        if raging:
            return Reply(status=429, headers={"Retry-After": f"{self.retry_after:g}"})
        return Reply(answer=ToolCalls([("reply", {"text": f"answer from {who}"})]))


def config(stand_in: OpenAIStandIn, **settings: Any) -> ModelConfig:
    info = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
            "structured_output": False, "multiple_system_messages": True}
    return ModelConfig(source="openai", model="stand-in", base_url=stand_in.base_url, model_info=info, **settings)


async def ask_everyone(model: ModelConfig, agents: int) -> tuple[AUNRuntime, list[str]]:
    runtime = AUNRuntime()
    aids = [f"a{n}.local" for n in range(agents)]
    make: Callable[[], AutonomousAgent] = lambda: AutonomousAgent(model)  # noqa: E731 - one config, one client each
    for aid in aids:
        await runtime.register_agent(aid, make)
    human = await runtime.open_inbox("alice.local")
    await runtime.start()
    for aid in aids:
        await human.send(aid, f"{aid}, what is the status?")
    await asyncio.wait_for(runtime.settle(), timeout=120)
    answers = [r.message.from_aid for r in runtime.archive.records(kinds=[RecordKind.RECEIVED])
               if r.owner == "alice.local" and r.message is not None]
    return runtime, answers


async def test_twenty_agents_ride_out_a_storm_together_and_each_answers_once() -> None:
    storm = Storm(STORM, RETRY_AFTER)
    with openai_stand_in(storm) as stand_in:
        runtime, answers = await ask_everyone(config(stand_in, max_concurrent=CONCURRENCY), AGENTS)
    assert sorted(answers) == sorted(f"a{n}.local" for n in range(AGENTS))  # each answered, once
    assert runtime.stats.dead_letters == 0
    assert runtime.stats.model_retries > 0
    during = [entry for entry in storm.log if entry[2] == 429]
    assert len(during) <= 40, len(during)  # twenty agents each retrying on their own clock sent more
    # The first wave (a slot each) meets the storm; after that about one probe per Retry-After.
    windows = math.ceil(STORM / RETRY_AFTER)
    assert len(during) <= CONCURRENCY + 2 * windows + 2, len(during)
    # No agent asks again before the Retry-After it was given has passed.
    for who in {entry[0] for entry in storm.log}:
        mine = [entry for entry in storm.log if entry[0] == who]
        for earlier, later in itertools.pairwise(mine):
            if earlier[2] == 429:
                assert later[1] >= earlier[3] + RETRY_AFTER, (who, later[1] - earlier[3])
    await runtime.close()


async def test_the_limiter_caps_the_calls_in_flight() -> None:
    in_flight = peak = 0
    lock = threading.Lock()

    def slow(body: dict[str, Any]) -> ToolCalls:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.3)
        with lock:
            in_flight -= 1
        return ToolCalls([("reply", {"text": "done"})])

    with openai_stand_in(slow) as stand_in:
        runtime, answers = await ask_everyone(config(stand_in, max_concurrent=3), 9)
    assert len(answers) == 9
    assert peak == 3
    await runtime.close()


async def test_an_exhausted_budget_announced_in_headers_holds_the_next_call() -> None:
    def announcing(body: dict[str, Any]) -> Reply:
        return Reply(
            headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"},
            answer=ToolCalls([("reply", {"text": "ok"})]),
        )

    with openai_stand_in(announcing) as stand_in:
        runtime, answers = await ask_everyone(config(stand_in, max_concurrent=1), 2)
    assert len(answers) == 2
    first, second = stand_in.arrivals
    assert second - first >= 1.5
    await runtime.close()
