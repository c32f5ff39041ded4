"""Cross-worker messages/s and latency: our worker runtime against raw autogen-ext workers, same run.

Each configuration is three processes on 127.0.0.1: a host, a sink worker and a source worker.

* ``raw``: autogen-ext's ``GrpcWorkerAgentRuntimeHost`` and ``GrpcWorkerAgentRuntime``; the source
  publishes a pydantic message to a topic the sink's ``@event`` agent subscribes to (at most once,
  nothing journaled).
* ``aun``: ``aun-runtime host`` and two :class:`~aun_runtime.distributed.WorkerRuntime` workers with
  file archives; the source's inbox sends AUN messages to ``sink.local`` (outbox, acknowledgements,
  journal commits, mailbox, channel, archive: everything on).

Phases: a flood of ``--flood`` messages as fast as the source can send them (throughput, and
latency that is mostly queueing), then ``--paced`` messages at ``--rate`` per second (latency of an
unloaded cluster). Latency is one-way, from the source's send call to the sink's handler, on
CLOCK_MONOTONIC (system-wide, so comparable across processes). Prints one JSON line; the ratios are
the figures to trust on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autogen_core import (
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
    try_get_known_serializers_for_type,
)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime, GrpcWorkerAgentRuntimeHost
from pydantic import BaseModel

from aun_runtime import AUNAgent, AUNMessage
from aun_runtime.distributed import worker_runtime

ROOT = Path(__file__).resolve().parents[1]
TALLY: _Tally | None = None


class Msg(BaseModel):
    seq: int
    t0: int
    body: str


class RawSink(RoutedAgent):
    @event
    async def on_msg(self, message: Msg, ctx: MessageContext) -> None:
        assert TALLY is not None
        TALLY.add(message.seq, message.t0)


class AUNSink(AUNAgent):
    @event
    async def on_msg(self, message: AUNMessage, ctx: MessageContext) -> None:
        assert TALLY is not None
        seq, t0, _ = (message.text or "").split(" ", 2)
        TALLY.add(int(seq), int(t0))


# -- roles (run in their own processes) ------------------------------------------------------------------


def _say(line: str) -> None:
    print(line, flush=True)


async def _read_line() -> str:
    return (await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)).strip()


class _Tally:
    """Receive times of the sink, reported when each phase is complete."""

    def __init__(self, phases: list[int]) -> None:
        self.phases = phases
        self.rows: list[tuple[int, int, int]] = []  # (seq, sent ns, received ns)

    def add(self, seq: int, sent: int) -> None:
        self.rows.append((seq, sent, time.monotonic_ns()))
        done = len(self.rows)
        if done in self._ends():
            start = done - self.phases[self._ends().index(done)]
            _say("PHASE " + json.dumps(self.rows[start:done]))

    def _ends(self) -> list[int]:
        return [sum(self.phases[: i + 1]) for i in range(len(self.phases))]


async def _raw_role(role: str, host: str, phases: list[int], rate: float) -> None:
    global TALLY
    if role == "host":
        server = GrpcWorkerAgentRuntimeHost(host)
        server.start()
        await asyncio.sleep(0.5)  # autogen-ext's host gives no readiness signal; the workers retry anyway
        _say("READY")
        await _read_line()
        return
    runtime = GrpcWorkerAgentRuntime(host)
    runtime.add_message_serializer(try_get_known_serializers_for_type(Msg))
    await runtime.start()
    if role == "sink":
        TALLY = _Tally(phases)
        await RawSink.register(runtime, "sink", lambda: RawSink("sink"))
        await runtime.add_subscription(TypeSubscription("bench", "sink"))
        _say("READY")
        await _read_line()
    else:
        _say("READY")
        await _source_phases(phases, rate, lambda n: runtime.publish_message(Msg(seq=n, t0=time.monotonic_ns(), body="x" * 40), TopicId("bench", "default")))
    await runtime.stop()


async def _aun_role(role: str, host: str, phases: list[int], rate: float, archive: str) -> None:
    global TALLY
    runtime = worker_runtime(host, archive=archive)
    if role == "sink":
        TALLY = _Tally(phases)
        await runtime.register_agent("sink.local", AUNSink)
        await runtime.start()
        _say("READY")
        await _read_line()
    else:
        inbox = await runtime.open_inbox("source.local")
        await runtime.start()
        _say("READY")
        await _source_phases(phases, rate, lambda n: inbox.send("sink.local", f"{n} {time.monotonic_ns()} {'x' * 40}"))
    print(runtime.core.stats_line(), file=sys.stderr)  # type: ignore[attr-defined]
    await runtime.stop()
    runtime.archive.close()


async def _source_phases(phases: list[int], rate: float, send: Any) -> None:
    seq = 0
    for index, count in enumerate(phases):
        if await _read_line() != "go":
            return
        paced = index > 0
        start = time.monotonic()
        for n in range(count):
            if paced:
                delay = start + n / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            await send(seq)
            seq += 1
        _say("SENT")
    await _read_line()


# -- the orchestrator -------------------------------------------------------------------------------


class _Child:
    def __init__(self, args: list[str], name: str) -> None:
        logs = os.environ.get("BENCH_LOG_DIR")  # stderr of each process, for finding out why
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(f"{logs}/{name}.log", "w") if logs else subprocess.DEVNULL,  # noqa: SIM115
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def expect(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise RuntimeError(f"{prefix!r} never came (exit {self.proc.wait()})")

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _run(kind: str, flood: int, paced: int, rate: float) -> dict[str, Any]:
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--flood", str(flood), "--paced", str(paced), "--rate", str(rate)]
    children: list[_Child] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if kind == "aun":
                profile_dir = os.environ.get("BENCH_PROFILE_DIR")
                profiled = ["-m", "cProfile", "-o", f"{profile_dir}/aun-host.prof"] if profile_dir else []
                host = _Child([sys.executable, *profiled, "-m", "aun_runtime", "host", "--address", "127.0.0.1:0"], "aun-host")
                children.append(host)
                address = host.expect("aun-runtime host ready on ")
            else:
                import socket

                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", 0))
                    address = f"127.0.0.1:{probe.getsockname()[1]}"
                host = _Child([*me, "--role", f"{kind}-host", "--host", address, *common], f"{kind}-host")
                children.append(host)
                host.expect("READY")
            sink = _Child([*me, "--role", f"{kind}-sink", "--host", address, "--archive", f"{tmp}/sink.sqlite", *common], f"{kind}-sink")
            children.append(sink)
            sink.expect("READY")
            source = _Child([*me, "--role", f"{kind}-source", "--host", address, "--archive", f"{tmp}/source.sqlite", *common], f"{kind}-source")
            children.append(source)
            source.expect("READY")
            results = []
            cpu: list[float] = []
            for _ in (flood, paced):
                before = _cpu_seconds(children)
                source.tell("go")
                rows = json.loads(sink.expect("PHASE "))
                source.expect("SENT")
                cpu.append(_cpu_seconds(children) - before)
                results.append(rows)
            for child in (source, sink, host):
                child.tell("exit")
            for child in (source, sink):
                child.proc.wait(timeout=30)
            host.proc.terminate()  # the CLI host stops on SIGTERM, the raw one on "exit"
            host.proc.wait(timeout=30)
        finally:
            for child in children:
                child.kill()
    flood_rows, paced_rows = results
    if os.environ.get("BENCH_LOG_DIR"):
        Path(os.environ["BENCH_LOG_DIR"], f"{kind}-paced.json").write_text(json.dumps(paced_rows))
    span = (max(r[2] for r in flood_rows) - min(r[1] for r in flood_rows)) / 1e9
    in_order = [r[0] for r in flood_rows + paced_rows] == sorted(r[0] for r in flood_rows + paced_rows)
    return {
        "flood_msgs_per_s": round(len(flood_rows) / span, 1),
        # CPU of host, sink and source together per flood message: what the machine pays, less
        # sensitive than throughput to what else runs on a shared machine.
        "flood_cpu_ms_per_msg": round(cpu[0] * 1000 / len(flood_rows), 3),
        "flood_p50_ms": _pct(flood_rows, 50),
        "flood_p99_ms": _pct(flood_rows, 99),
        "paced_p50_ms": _pct(paced_rows, 50),
        "paced_p99_ms": _pct(paced_rows, 99),
        "delivered": len(flood_rows) + len(paced_rows),
        "in_order": in_order,
    }


def _cpu_seconds(children: list[_Child]) -> float:
    """User and system CPU time of the child processes so far (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for child in children:
        fields = Path(f"/proc/{child.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def _pct(rows: list[list[int]], q: int) -> float:
    latencies = sorted((r[2] - r[1]) / 1e6 for r in rows)
    return round(statistics.quantiles(latencies, n=100)[q - 1] if q < 100 else latencies[-1], 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=3000)
    parser.add_argument("--paced", type=int, default=500)
    parser.add_argument("--rate", type=float, default=250.0, help="paced messages per second")
    parser.add_argument("--repeat", type=int, default=2, help="runs per kind; the best flood run counts")
    parser.add_argument("--role")
    parser.add_argument("--host")
    parser.add_argument("--archive", default=":memory:")
    args = parser.parse_args()
    if args.role:
        kind, role = args.role.split("-", 1)
        phases = [args.flood, args.paced]
        coro = (
            _raw_role(role, args.host, phases, args.rate)
            if kind == "raw"
            else _aun_role(role, args.host, phases, args.rate, args.archive)
        )
        profile_dir = os.environ.get("BENCH_PROFILE_DIR")  # for finding where the time goes
        if profile_dir:
            import cProfile

            cProfile.runctx("asyncio.run(coro)", globals(), {"coro": coro, "asyncio": asyncio}, f"{profile_dir}/{args.role}.prof")
        else:
            asyncio.run(coro)
        return
    runs: dict[str, list[dict[str, Any]]] = {"raw": [], "aun": []}
    for _ in range(args.repeat):
        for kind in ("raw", "aun"):  # interleaved, so that machine noise hits both alike
            runs[kind].append(_run(kind, args.flood, args.paced, args.rate))
    best = {kind: max(r, key=lambda x: x["flood_msgs_per_s"]) for kind, r in runs.items()}
    print(
        json.dumps(
            {
                "bench": "grpc_workers",
                "flood": args.flood,
                "paced": args.paced,
                "rate": args.rate,
                "raw_autogen": best["raw"],
                "aun_workers": best["aun"],
                "throughput_ratio": round(best["aun"]["flood_msgs_per_s"] / best["raw"]["flood_msgs_per_s"], 3),
                "cpu_per_msg_ratio": round(
                    min(r["flood_cpu_ms_per_msg"] for r in runs["aun"])
                    / min(r["flood_cpu_ms_per_msg"] for r in runs["raw"]),
                    3,
                ),
                "paced_p50_ratio": round(best["aun"]["paced_p50_ms"] / best["raw"]["paced_p50_ms"], 3),
                "paced_p99_ratio": round(best["aun"]["paced_p99_ms"] / best["raw"]["paced_p99_ms"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
