"""Delivery throughput: raw autogen-core, AUNRuntime on both cores, and the asyncio.Queue floor, in one run.

Each system delivers N small text messages to 1 subscriber and to 10 subscribers:

* ``raw_autogen``: autogen-core's ``SingleThreadedAgentRuntime``, ``publish_message`` of prebuilt
  pydantic messages to ``@event`` sink agents (one ``TypeSubscription`` each); no mailbox, no dedup,
  no archive.
* ``aun_single_threaded``: ``AUNRuntime`` on ``AUNSingleThreadedRuntime`` (autogen-core's runtime with
  the lean publish path), ``send`` (1 subscriber) or ``group_send`` to a broadcast group
  (10 subscribers), with mailbox, channel and an SQLite archive file all on; each message is built
  and validated by the send call.
* ``aun_actor``: the same workload on ``AUNActorRuntime`` (the default core): one drain task per
  active agent, the mailbox bound enforced by the core.
* ``asyncio_queue``: one bounded ``asyncio.Queue`` per consumer task; the floor for any in-process
  hand-off.

Every configuration runs ``--repeat`` times in this process, the systems taking turns so that a
burst of load from elsewhere hits them alike; the median run is reported, with the slowest and the
fastest. The machine is shared, so read the ratios (of medians), not the absolute figures. Prints
one JSON line.

Usage: ``python bench/runtime_throughput.py [--messages 10000] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from autogen_core import (
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    event,
)
from pydantic import BaseModel

from aun_runtime import AUNActorRuntime, AUNAgent, AUNMessage, AUNRuntime, AUNSingleThreadedRuntime

FANOUTS = (1, 10)
Workload = Callable[[int, int], Awaitable[float]]


class BenchMsg(BaseModel):
    seq: int
    body: str


class RawSink(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("sink")
        self.count = 0

    @event
    async def on_msg(self, message: BenchMsg, ctx: MessageContext) -> None:
        self.count += 1


class AUNSink(AUNAgent):
    def __init__(self) -> None:
        super().__init__("sink")
        self.count = 0

    @event
    async def on_msg(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.count += 1


async def raw_autogen(n: int, fanout: int) -> float:
    runtime = SingleThreadedAgentRuntime()
    for i in range(fanout):
        await RawSink.register(runtime, f"sink{i}", RawSink)
        await runtime.add_subscription(TypeSubscription("bench", f"sink{i}"))
    messages = [BenchMsg(seq=i, body="hello world") for i in range(n)]
    runtime.start()
    start = time.perf_counter()
    for message in messages:
        await runtime.publish_message(message, TopicId("bench", "default"))
    await runtime.stop_when_idle()
    return (n * fanout) / (time.perf_counter() - start)


async def aun_on(runtime: AUNRuntime, n: int, fanout: int) -> float:
    sinks = [f"sink{i}.local" for i in range(fanout)]
    for aid in sinks:
        await runtime.register_agent(aid, AUNSink)
    await runtime.register_agent("source.local", AUNSink)
    if fanout > 1:
        await runtime.create_group("bench", ["source.local", *sinks])
    await runtime.start()
    start = time.perf_counter()
    if fanout == 1:
        for _ in range(n):
            await runtime.send(sinks[0], "hello world", sender="source.local")
    else:
        for _ in range(n):
            await runtime.group_send("bench", "hello world", sender="source.local")
    await runtime.settle()
    elapsed = time.perf_counter() - start
    delivered = runtime.stats.delivered
    await runtime.close()
    if delivered != n * fanout:
        raise AssertionError(f"delivered {delivered} of {n * fanout}")
    return delivered / elapsed


async def aun_single_threaded(n: int, fanout: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = AUNRuntime(archive=Path(tmp) / "archive.sqlite", core=AUNSingleThreadedRuntime())
        return await aun_on(runtime, n, fanout)


async def aun_actor(n: int, fanout: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = AUNRuntime(archive=Path(tmp) / "archive.sqlite", core=AUNActorRuntime())
        return await aun_on(runtime, n, fanout)


async def asyncio_queue(n: int, fanout: int) -> float:
    queues: list[asyncio.Queue[BenchMsg | None]] = [asyncio.Queue(1024) for _ in range(fanout)]
    counts = [0] * fanout

    async def consume(i: int) -> None:
        queue = queues[i]
        while await queue.get() is not None:
            counts[i] += 1

    consumers = [asyncio.create_task(consume(i)) for i in range(fanout)]
    messages = [BenchMsg(seq=i, body="hello world") for i in range(n)]
    start = time.perf_counter()
    for message in messages:
        for queue in queues:
            await queue.put(message)
        await asyncio.sleep(0)
    for queue in queues:
        await queue.put(None)
    await asyncio.gather(*consumers)
    return sum(counts) / (time.perf_counter() - start)


WORKLOADS: dict[str, Workload] = {
    "raw_autogen": raw_autogen,
    "aun_single_threaded": aun_single_threaded,
    "aun_actor": aun_actor,
    "asyncio_queue": asyncio_queue,
}
BASELINE = "raw_autogen"
FLOOR = "asyncio_queue"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="workloads to run (default: all)")
    args = parser.parse_args()
    names = args.only or list(WORKLOADS)
    for required in (BASELINE, FLOOR):
        if required not in names:
            names.append(required)

    samples: dict[str, dict[str, list[float]]] = {name: {str(f): [] for f in FANOUTS} for name in names}
    for _ in range(args.repeat):
        for fanout in FANOUTS:
            for name in names:
                gc.collect()
                samples[name][str(fanout)].append(await WORKLOADS[name](args.messages, fanout))
    # The median run of each: one lucky or unlucky run (the machine is shared) moves neither it nor
    # the ratios much, where the best run of the baseline alone could.
    results = {name: {f: round(statistics.median(rates)) for f, rates in by.items()} for name, by in samples.items()}
    spread = {
        name: {f: [round(min(rates)), round(max(rates))] for f, rates in by.items()} for name, by in samples.items()
    }
    ratios = {
        f"{name}_vs_{BASELINE}": {f: round(results[name][f] / results[BASELINE][f], 2) for f in results[name]}
        for name in names
        if name not in (BASELINE, FLOOR)
    }
    ratios.update(
        {
            f"{FLOOR}_vs_{name}": {f: round(results[FLOOR][f] / results[name][f], 2) for f in results[name]}
            for name in names
            if name != FLOOR
        }
    )
    print(
        json.dumps(
            {
                "bench": "runtime_throughput",
                "unit": "deliveries/s",
                "messages": args.messages,
                "repeat": args.repeat,
                "python": sys.version.split()[0],
                "results": results,
                "min_max": spread,
                "ratios": ratios,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
