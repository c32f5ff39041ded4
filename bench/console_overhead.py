"""What an open console costs the runtime it watches.

The same workload runs with and without a console in the runtime's process, taking turns in one
run: N direct messages from an application inbox to an agent, until everything has settled. With
the console, a page follows it live: a separate process holds the event stream open and reads every
record, as a browser would. Prints one JSON line; quote the ratios.

Usage: ``python bench/console_overhead.py [--messages 5000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.console import Console

# A page stand-in in its own process: reads the stream until it has seen ``total`` records.
READER = """
import sys, urllib.request
url, total = sys.argv[1], int(sys.argv[2])
seen = 0
with urllib.request.urlopen(url) as stream:
    print("connected", flush=True)
    for line in stream:
        if line.startswith(b"id: "):
            seen = int(line[4:])
            if seen >= total:
                break
print("caught up", flush=True)
"""


class Sink(AUNAgent):
    """Takes every message, answers none."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        pass


async def run_once(messages: int, folder: Path, with_console: bool) -> tuple[float, float]:
    """Seconds to send and settle ``messages``; and, with a console, how long the page lagged after."""
    runtime = AUNRuntime(archive=folder / f"run-{time.monotonic_ns()}.sqlite")
    await runtime.start()
    await runtime.register_agent("sink.local", Sink)
    inbox = await runtime.open_inbox("app.local")
    console = reader = None
    if with_console:
        console = Console(runtime)
        await console.start()
        # Each message makes two records (sent, received); the two registrations add none.
        reader = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            READER,
            console.url + "api/events?after=0",
            str(2 * messages),
            stdout=asyncio.subprocess.PIPE,
        )
        assert reader.stdout is not None
        assert await reader.stdout.readline() == b"connected\n"
    start = time.perf_counter()
    for n in range(messages):
        await inbox.send("sink.local", f"message {n}")
    await runtime.settle()
    elapsed = time.perf_counter() - start
    lag = 0.0
    if reader is not None and reader.stdout is not None:
        await reader.stdout.readline()
        lag = time.perf_counter() - start - elapsed
        await reader.wait()
    if console is not None:
        await console.stop()
    await runtime.close()
    return elapsed, lag


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    best = {False: float("inf"), True: float("inf")}
    lags = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for with_console in (False, True):  # taking turns: a burst of load elsewhere hits both
                elapsed, lag = await run_once(args.messages, Path(tmp), with_console)
                best[with_console] = min(best[with_console], elapsed)
                if with_console:
                    lags.append(lag)
    print(
        json.dumps(
            {
                "bench": "console_overhead",
                "messages": args.messages,
                "throughput_with_console_over_without": round(best[False] / best[True], 3),
                "page_lag_after_settle_ms": round(min(lags) * 1000, 1),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
