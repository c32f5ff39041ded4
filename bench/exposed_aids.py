"""Benchmark: what one process pays to expose N AIDs on the AUN network, against N plain connections.

One local AUN gateway runs in its own process (rate limit lifted) for the whole run. For each N
(``--counts``), two configurations run one after the other, each in a fresh process of its own so
that its RSS, threads and descriptors are its own:

- exposed: one ``AUNRuntime`` with N AIDs and a ``GatewayAgent`` exposing all of them. Each AID gets
  its AUN identity (the client's ``AIDStore``: keys, registration, its client directory) and its own
  ``fastaun`` client, connected. Measured from ``GatewayAgent.start`` until ``wait_connected``.
- plain: N bare ``websockets`` connections to the same gateway's ``/aun`` endpoint, each doing the
  client's handshake minimum by hand (register the AID, the two login phases, ``auth.connect``),
  all at once, as the gateway agent connects its AIDs. No client library, no runtime.

Per configuration: seconds until all N are connected, and the growth from just before to just
after of RSS (``/proc/self/statm``), threads (``/proc/self/status``) and open descriptors
(``/proc/self/fd``); then the ratios exposed / plain per AID. A count that does not connect within
``--timeout`` seconds is reported as timed out, with how many were connected by then.
Prints one JSON line.

    python bench/exposed_aids.py [--counts 10,100] [--full] [--timeout 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gateway_relay as relay_bench  # the gateway's start-up and the hand-made handshake, reused as is
from _memory import MB, rss_bytes, run_children

from aun_runtime import AUNRuntime
from aun_runtime.network import GatewayAgent, GatewayAgentConfig, LinkState

#: Seconds between the last connection and the reading "after", for what settles in the background.
SETTLE = 1.0


def _threads() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def _reading() -> dict[str, int]:
    return {"rss": rss_bytes(), "threads": _threads(), "fds": len(os.listdir("/proc/self/fd"))}


def _growth(before: dict[str, int], after: dict[str, int], count: int, seconds: float) -> dict[str, Any]:
    return {
        "connect_s": round(seconds, 3),
        "rss_mb": round((after["rss"] - before["rss"]) / MB, 1),
        "threads": after["threads"] - before["threads"],
        "fds": after["fds"] - before["fds"],
        "kb_per_aid": round((after["rss"] - before["rss"]) / 1024 / count, 1),
        "threads_per_aid": round((after["threads"] - before["threads"]) / count, 2),
        "fds_per_aid": round((after["fds"] - before["fds"]) / count, 2),
    }


async def exposed(info: dict[str, Any], data: Path, count: int, timeout: float) -> dict[str, Any]:
    issuer = info["issuer"]
    aids = [f"exposed{count}-{i}.{issuer}" for i in range(count)]
    runtime = AUNRuntime(archive=data / "runtime.sqlite", domain=issuer)
    await runtime.start()
    for aid in aids:
        await runtime.open_inbox(aid)
    config = GatewayAgentConfig(data_dir=data / "gateway-agent", gateway_url=info["gateway_url"],
                                root_ca_path=info["root_ca_path"], reconnect_max_delay=1.0)
    agent = GatewayAgent(runtime, config)
    before = _reading()
    began = time.perf_counter()
    await agent.start()
    try:
        await asyncio.wait_for(agent.wait_connected(), timeout)
    except TimeoutError:
        connected = sum(state is LinkState.CONNECTED for state in agent.states().values())
        return {"timed_out": True, "connected": connected, "after_s": timeout}
    seconds = time.perf_counter() - began
    await asyncio.sleep(SETTLE)
    return _growth(before, _reading(), count, seconds)  # the client threads are left to the exit


async def plain(info: dict[str, Any], count: int, timeout: float) -> dict[str, Any]:
    url, issuer = info["gateway_url"], info["issuer"]

    async def one(i: int) -> Any:
        aid = f"plain{count}-{i}.{issuer}"
        return await relay_bench.connect(url, await relay_bench.login(url, aid), f"plain-{i}")

    before = _reading()
    began = time.perf_counter()
    tasks = [asyncio.ensure_future(one(i)) for i in range(count)]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    if pending:
        return {"timed_out": True, "connected": sum(not t.exception() for t in done), "after_s": timeout}
    seconds = time.perf_counter() - began
    await asyncio.sleep(SETTLE)
    return _growth(before, _reading(), count, seconds)


async def child(name: str, info: dict[str, Any], timeout: float) -> dict[str, Any]:
    logging.getLogger("aun_runtime").setLevel(logging.ERROR)
    kind, count = name.split(":")
    with tempfile.TemporaryDirectory() as scratch:
        if kind == "exposed":
            return await exposed(info, Path(scratch), int(count), timeout)
        return await plain(info, int(count), timeout)


def main(counts: list[int], timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data:
        gateway, line = relay_bench.start([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data", data,
                                           "--json", "--rate", "1000000"])
        try:
            options = ["--gateway", line, "--timeout", str(timeout)]
            # The child bounds its own wait; the margin is for its start-up and the "after" reading.
            names = [f"{kind}:{n}" for n in counts for kind in ("plain", "exposed")]
            results = run_children(__file__, names, options, timeout=timeout + 60)
        finally:
            gateway.terminate()
            gateway.wait(10)
    figures: dict[str, Any] = {}
    for n in counts:
        mine, base = results[f"exposed:{n}"], results[f"plain:{n}"]
        entry: dict[str, Any] = {"exposed": mine, "plain": base}
        if not mine.get("timed_out") and not base.get("timed_out"):
            entry["ratio_exposed_plain"] = {key: round(mine[key] / base[key], 1) if base[key] else None
                                            for key in ("connect_s", "rss_mb", "threads", "fds")}
        figures[str(n)] = entry
    return {"bench": "exposed_aids", "timeout_s": timeout, "counts": figures}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="10,100", help="comma-separated numbers of AIDs")
    parser.add_argument("--full", action="store_true", help="also 1,000 AIDs (minutes today)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds each count may take to connect")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--gateway", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        result = asyncio.run(child(options.child, json.loads(options.gateway), options.timeout))
        print(json.dumps(result), flush=True)
        os._exit(0)  # N clients' threads and connections go with the process, not one by one
    counts = [int(n) for n in options.counts.split(",")] + ([1000] if options.full else [])
    print(json.dumps(main(sorted(set(counts)), options.timeout)))
