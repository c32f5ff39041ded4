"""Memory while a publisher floods a slow agent: raw autogen-core against AUNRuntime, in one run.

A publisher sends N messages to one agent as fast as it can; the agent yields to the event loop a
few times per message, so it is slower than the publisher. RSS is sampled after each quarter of
the messages has been published, and once everything has been handled. Each configuration runs in
a fresh process (RSS is per process):

* ``raw_autogen``: autogen-core's ``SingleThreadedAgentRuntime``; ``publish_message`` never waits,
  so every message not yet handled sits in its queue.
* ``aun_single_threaded`` and ``aun_actor``: ``AUNRuntime`` (mailbox of 1024, archive file) on each
  core; the publisher waits for room, so at most a mailbox's worth is ever waiting.

Reported: the samples in MB, the growth from the first quarter to the end of publishing, the growth
per published message, and the growth over the second half alone: the first quarter warms up what
is bounded on purpose (the dedup window, the archive writer's queue, SQLite's page cache), so a
runtime whose memory is flat under the flood shows almost nothing there. The ratio compares raw
autogen-core's growth with each AUN core's.
Prints one JSON line.

Usage: ``python bench/flood_memory.py [--messages 200000]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autogen_core import (
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    event,
)

from aun_runtime import AUNActorRuntime, AUNAgent, AUNMessage, AUNRuntime, AUNSingleThreadedRuntime

sys.path.insert(0, str(Path(__file__).parent))
from _memory import MB, peak_rss_bytes, rss_bytes, run_children

#: Loop turns the agent takes per message: enough to make it slower than any publisher here.
SLOWNESS = 3


async def _be_slow() -> None:
    for _ in range(SLOWNESS):
        await asyncio.sleep(0)


@dataclass
class Chunk:
    seq: int
    body: str


class RawSlow(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("slow")
        self.count = 0

    @event
    async def on_chunk(self, message: Chunk, ctx: MessageContext) -> None:
        await _be_slow()
        self.count += 1


class AUNSlow(AUNAgent):
    def __init__(self) -> None:
        super().__init__("slow")
        self.count = 0

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        await _be_slow()
        self.count += 1


async def raw_autogen(messages: int) -> dict[str, Any]:
    runtime = SingleThreadedAgentRuntime()
    await runtime.register_factory("slow", RawSlow)
    await runtime.add_subscription(TypeSubscription("flood", "slow"))
    runtime.start()
    samples = _Samples(messages)
    start = time.perf_counter()
    for n in range(messages):
        await runtime.publish_message(Chunk(n, "x" * 100), TopicId("flood", "default"))
        samples.after(n + 1)
    await runtime.stop_when_idle()
    return samples.report(time.perf_counter() - start)


async def _aun(core: Any, messages: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = AUNRuntime(core=core, archive=Path(tmp) / "archive.sqlite")
        await runtime.register_agent("slow.local", AUNSlow)
        inbox = await runtime.open_inbox()
        await runtime.start()
        samples = _Samples(messages)
        start = time.perf_counter()
        for n in range(messages):
            await inbox.send("slow.local", "x" * 100)
            samples.after(n + 1)
        await runtime.settle()
        result = samples.report(time.perf_counter() - start)
        slow = await runtime.agent_instance("slow.local", AUNSlow)
        result["mailbox_high_water"] = runtime.mailbox("slow.local").high_water
        if slow.count != messages:
            raise AssertionError(f"handled {slow.count} of {messages}")
        await runtime.close()
        return result


async def aun_single_threaded(messages: int) -> dict[str, Any]:
    return await _aun(AUNSingleThreadedRuntime(), messages)


async def aun_actor(messages: int) -> dict[str, Any]:
    return await _aun(AUNActorRuntime(), messages)


class _Samples:
    def __init__(self, messages: int) -> None:
        gc.collect()
        self.base = rss_bytes()
        self.marks = {messages * q // 4: q for q in (1, 2, 3, 4)}
        self.taken: list[float] = []

    def after(self, published: int) -> None:
        if published in self.marks:
            self.taken.append(round((rss_bytes() - self.base) / MB, 1))

    def report(self, elapsed: float) -> dict[str, Any]:
        growth = self.taken[-1] - self.taken[0]
        second_half = self.taken[-1] - self.taken[1]
        published = max(self.marks) - min(self.marks)
        return {
            "rss_growth_at_quarters_mb": self.taken,
            "growth_while_publishing_mb": round(growth, 1),
            "bytes_per_message": round(growth * MB / published),
            "growth_second_half_mb": round(second_half, 1),
            "peak_mb": round(peak_rss_bytes() / MB, 1),
            "seconds": round(elapsed, 1),
        }


CONFIGURATIONS = {"raw_autogen": raw_autogen, "aun_single_threaded": aun_single_threaded, "aun_actor": aun_actor}
BASELINE = "raw_autogen"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--child", choices=sorted(CONFIGURATIONS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(CONFIGURATIONS[args.child](args.messages))))
        return

    results = run_children(__file__, CONFIGURATIONS, ["--messages", str(args.messages)])
    baseline = results[BASELINE]["growth_while_publishing_mb"]
    print(
        json.dumps(
            {
                "bench": "flood_memory",
                "messages": args.messages,
                "python": sys.version.split()[0],
                "results": results,
                "ratios": {
                    f"{BASELINE}_growth_vs_{name}": round(baseline / max(0.1, r["growth_while_publishing_mb"]), 1)
                    for name, r in results.items()
                    if name != BASELINE
                },
            }
        )
    )


if __name__ == "__main__":
    main()
