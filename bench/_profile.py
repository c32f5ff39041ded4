"""Where a benchmark's time goes: a wall-clock sampler over every thread of the process.

A thread samples every other thread's stack (``sys._current_frames``) at a fixed interval. A sample
is *idle* when the thread waits (in ``select``/``epoll``, a lock, a queue); otherwise it is charged to
the first frame, from the innermost out, outside the standard library: its package and module
(``aun_core/_client/v2_e2ee.py``, ``websockets/...``, ``aun_runtime/network/_link.py``); a sample
entirely in the standard library is charged to its innermost module (``asyncio``, ``json``...). A
call into C (SQLite, OpenSSL) shows as the Python line that made it. Threads are grouped by role:
the benchmark's own event loop (``main``), the AUN client's per-connection threads
(``aun-network-actor``), and the rest by name. CPU of the gateway's process is read from ``/proc``.

Two targets, each printing one JSON line:

    python bench/_profile.py bridge [--plaintext] [--messages 1000] [--window 64]
    python bench/_profile.py client [--messages 1000] [--window 64]
    python bench/_profile.py connect [--count 50]

``bridge``: ``bench/bridge_roundtrip.py``'s bridge path alone (runtime A -> gateway -> runtime B,
encrypted unless ``--plaintext``), sampled during its throughput run; ``client``: its client-library
path alone (one ``fastaun`` client sending, another receiving), the same way. ``connect``:
``bench/exposed_aids.py``'s exposed configuration, sampled from ``GatewayAgent.start`` until every
AID is connected.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import os
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_STDLIB = sysconfig.get_paths()["stdlib"]
_IDLE = {("selectors.py", "select"), ("threading.py", "wait"), ("queue.py", "get"), ("thread.py", "_worker"),
         ("threading.py", "_wait_for_tstate_lock")}
_BENCH = str(Path(__file__).resolve().parent)  # the benchmarks' own frames are not charged
_ROOTS = ("site-packages/", "aun_runtime/", "protocols/")


def _where(filename: str) -> str:
    for root in _ROOTS:
        index = filename.rfind(root)
        if index >= 0:
            return filename[index + len(root) * (root == "site-packages/"):]
    return filename


def _bucket(frame: FrameType | None) -> tuple[str, str, str]:
    """(idle | busy, module, "module:function < its caller") for one thread's stack."""
    leaf = frame
    if leaf is not None and (os.path.basename(leaf.f_code.co_filename), leaf.f_code.co_name) in _IDLE:
        return "idle", "", ""
    while frame is not None:
        filename = frame.f_code.co_filename
        if (not filename.startswith(_STDLIB) or "site-packages" in filename) and _BENCH not in filename:
            caller = frame.f_back.f_code.co_name if frame.f_back is not None else ""
            return "busy", _where(filename), f"{_where(filename)}:{frame.f_code.co_name} < {caller}"
        frame = frame.f_back
    assert leaf is not None
    module = "stdlib:" + os.path.relpath(leaf.f_code.co_filename, _STDLIB).split(os.sep)[0]
    return "busy", module, f"{module}:{leaf.f_code.co_name}"


class Sampler:
    """Samples every thread's stack every ``interval`` seconds between :meth:`start` and :meth:`stop`."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.samples: collections.Counter[tuple[str, str, str, str]] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._cpu = 0.0
        self._wall = 0.0

    def start(self) -> Sampler:
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        self._thread.start()
        return self

    def _run(self) -> None:
        own = threading.get_ident()
        while not self._stop.wait(self.interval):
            names = {thread.ident: thread.name for thread in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == own:
                    continue
                name = names.get(ident, "?")
                role = "main" if name == "MainThread" else name.rstrip("0123456789_-() ").split(" ")[0] or name
                self.samples[(role, *_bucket(frame))] += 1

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        wall, cpu = time.perf_counter() - self._wall, time.process_time() - self._cpu
        roles: collections.Counter[str] = collections.Counter()
        busy_by_role: collections.Counter[str] = collections.Counter()
        where: collections.Counter[str] = collections.Counter()
        functions: collections.Counter[str] = collections.Counter()
        for (role, state, place, function), n in self.samples.items():
            roles[role] += n
            if state == "busy":
                busy_by_role[role] += n
                where[place] += n
                functions[function] += n
        busy = sum(where.values()) or 1
        return {
            "wall_s": round(wall, 2), "process_cpu_s": round(cpu, 2),
            "threads": {role: {"samples": n, "busy_pct": round(100 * busy_by_role[role] / n, 1)}
                        for role, n in roles.most_common()},
            "busy_pct_by_module": {place: round(100 * n / busy, 1) for place, n in where.most_common(20)},
            "busy_pct_by_function": {place: round(100 * n / busy, 1) for place, n in functions.most_common(20)},
        }


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def roundtrip(target: str, messages: int, window: int, encrypt: bool) -> dict[str, Any]:
    import bridge_roundtrip
    import gateway_relay as relay_bench

    logging.getLogger("aun_runtime").setLevel(logging.ERROR)
    bridge_roundtrip.Sink.arrived = asyncio.Queue()
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch)
        gateway, line = relay_bench.start([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data",
                                           str(data / "gateway"), "--json", "--rate", "1000000"])
        started: list[Any] = []
        clients: list[Any] = []
        try:
            if target == "bridge":
                path, started = await bridge_roundtrip.bridge(json.loads(line), data, "profiled", encrypt=encrypt)
            else:
                path, clients = await bridge_roundtrip.clients(json.loads(line), data)
            await path.latency(100)  # warm up, as the benchmark does
            gateway_cpu = _cpu_seconds(gateway.pid)
            sampler = Sampler().start()
            rate = await path.throughput(messages, window)
            report = sampler.stop()
            report["gateway_process_cpu_s"] = round(_cpu_seconds(gateway.pid) - gateway_cpu, 2)
        finally:
            for item in started:
                await item.stop()
            for client in clients:
                await client.close()
            gateway.terminate()
            gateway.wait(10)
    report["process_cpu_ms_per_msg"] = round(1000 * report["process_cpu_s"] / messages, 2)
    return {"profile": target, "encrypt": encrypt, "messages": messages, "window": window,
            "msgs_per_s": round(rate, 1), **report}


async def connect(count: int) -> dict[str, Any]:
    import exposed_aids
    import gateway_relay as relay_bench

    logging.getLogger("aun_runtime").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch)
        gateway, line = relay_bench.start([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data",
                                           str(data / "gateway"), "--json", "--rate", "1000000"])
        try:
            sampler = Sampler().start()
            gateway_cpu = _cpu_seconds(gateway.pid)
            figures = await exposed_aids.exposed(json.loads(line), data, count, 600.0)
            report = sampler.stop()
            report["gateway_process_cpu_s"] = round(_cpu_seconds(gateway.pid) - gateway_cpu, 2)
        finally:
            gateway.terminate()
            gateway.wait(10)
    return {"profile": "connect", "count": count, **figures, **report}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=("bridge", "client", "connect"))
    parser.add_argument("--plaintext", action="store_true")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--count", type=int, default=50)
    options = parser.parse_args()
    if options.target != "connect":
        result = asyncio.run(roundtrip(options.target, options.messages, options.window, not options.plaintext))
    else:
        result = asyncio.run(connect(options.count))
    print(json.dumps(result), flush=True)
    os._exit(0)
