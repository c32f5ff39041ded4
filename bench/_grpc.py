"""What the gRPC benchmarks share: the roles their processes play, and starting and reading them.

Every process of a gRPC benchmark is this file run with ``--role KIND-ROLE`` (``raw-host``,
``aun-sink``, ...): a host, a sink that records when each message arrived, or a source that sends
when told ``go`` on stdin. ``--pair P`` names a sink and source pair's own AIDs and topic, so that
several pairs can share one host. The orchestrators (``grpc_workers.py``, ``grpc_scale.py``) start
the processes with :class:`Child` and read them line by line.

``raw`` is autogen-ext's ``GrpcWorkerAgentRuntimeHost`` and ``GrpcWorkerAgentRuntime``: the source
publishes a pydantic message to a topic the sink's ``@event`` agent subscribes to (at most once,
nothing journaled). ``aun`` is ``aun-runtime host`` and two
:class:`~aun_runtime.distributed.WorkerRuntime` workers with file archives: the source's inbox
sends AUN messages to the sink's AID (outbox, acknowledgements, journal commits, mailbox, channel,
archive: everything on).

With ``BENCH_PROFILE_DIR`` set, each process writes a cProfile file there named after its role (and
pair); with ``BENCH_LOG_DIR``, its stderr goes to a log file there.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
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


class Busy(AUNAgent):
    """A service AID's agent in the benchmarks: a fixed amount of CPU work per message."""

    def __init__(self, rounds: int) -> None:
        super().__init__("hashes")
        self.rounds = rounds

    @event
    async def on_msg(self, message: AUNMessage, ctx: MessageContext) -> None:
        digest = b"x"
        for _ in range(self.rounds):
            digest = hashlib.sha256(digest).digest()


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


async def _raw_role(role: str, host: str, phases: list[int], rate: float, pair: str) -> None:
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
        await RawSink.register(runtime, f"sink{pair}", lambda: RawSink("sink"))
        await runtime.add_subscription(TypeSubscription(f"bench{pair}", f"sink{pair}"))
        _say("READY")
        await _read_line()
    else:
        _say("READY")
        topic = TopicId(f"bench{pair}", "default")
        await _source_phases(phases, rate, lambda n: runtime.publish_message(Msg(seq=n, t0=time.monotonic_ns(), body="x" * 40), topic))
    await runtime.stop()


async def _aun_role(role: str, host: str, phases: list[int], rate: float, archive: str, pair: str) -> None:
    global TALLY
    runtime = worker_runtime(host, archive=archive)
    sink = f"sink{pair}.local"
    if role == "sink":
        TALLY = _Tally(phases)
        await runtime.register_agent(sink, AUNSink)
        await runtime.start()
        _say("READY")
        await _read_line()
    else:
        inbox = await runtime.open_inbox(f"source{pair}.local")
        await runtime.start()
        _say("READY")
        await _source_phases(phases, rate, lambda n: inbox.send(sink, f"{n} {time.monotonic_ns()} {'x' * 40}"))
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


def role_main(argv: list[str] | None = None) -> None:
    """Play one role: ``--role KIND-ROLE --host ADDRESS [--pair P] [--archive FILE] --flood N --paced N``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--pair", default="")
    parser.add_argument("--archive", default=":memory:")
    parser.add_argument("--flood", type=int, required=True)
    parser.add_argument("--paced", type=int, default=0)
    parser.add_argument("--rate", type=float, default=250.0)
    args = parser.parse_args(argv)
    kind, role = args.role.split("-", 1)
    phases = [args.flood, args.paced] if args.paced else [args.flood]
    coro = (
        _raw_role(role, args.host, phases, args.rate, args.pair)
        if kind == "raw"
        else _aun_role(role, args.host, phases, args.rate, args.archive, args.pair)
    )
    profile_dir = os.environ.get("BENCH_PROFILE_DIR")  # for finding where the time goes
    if profile_dir:
        import cProfile

        out = f"{profile_dir}/{args.role}{args.pair}.prof"
        cProfile.runctx("asyncio.run(coro)", globals(), {"coro": coro, "asyncio": asyncio}, out)
    else:
        asyncio.run(coro)


# -- the orchestrators' side ------------------------------------------------------------------------


class Child:
    """One benchmark process, talked to over its stdin and stdout."""

    def __init__(self, args: list[str], name: str) -> None:
        logs = os.environ.get("BENCH_LOG_DIR")  # stderr of each process, for finding out why
        self.name = name
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
        raise RuntimeError(f"{self.name}: {prefix!r} never came (exit {self.proc.wait()})")

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def cpu_seconds(self) -> float:
        """User and system CPU time of the process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def role(kind: str, name: str, host: str, *options: str, pair: str = "") -> Child:
    """Start a sink or source process (``name``) of ``kind`` and wait until it is ready."""
    args = [sys.executable, str(Path(__file__).resolve()), "--role", f"{kind}-{name}", "--host", host, "--pair", pair, *options]
    child = Child(args, f"{kind}-{name}{pair}")
    child.expect("READY")
    return child


def start_host(kind: str, flood: int) -> tuple[Child, str]:
    """Start a host of ``kind`` on a free loopback port: the process and its address."""
    if kind == "aun":
        profile_dir = os.environ.get("BENCH_PROFILE_DIR")
        profiled = ["-m", "cProfile", "-o", f"{profile_dir}/aun-host.prof"] if profile_dir else []
        host = Child([sys.executable, *profiled, "-m", "aun_runtime", "host", "--address", "127.0.0.1:0"], "aun-host")
        return host, host.expect("aun-runtime host ready on ")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    host = Child([sys.executable, str(Path(__file__).resolve()), "--role", "raw-host", "--host", address, "--flood", str(flood)], "raw-host")
    host.expect("READY")
    return host, address


def stop(host: Child, workers: list[Child]) -> None:
    """Tell every process to exit and wait for it (the CLI host stops on SIGTERM, the raw one on "exit")."""
    for child in [*workers, host]:
        child.tell("exit")
    for child in workers:
        child.proc.wait(timeout=30)
    host.proc.terminate()
    host.proc.wait(timeout=30)


def pct(rows: list[list[int]], q: int) -> float:
    """The ``q``-th percentile of one-way latency in ms of ``(seq, sent ns, received ns)`` rows."""
    latencies = sorted((r[2] - r[1]) / 1e6 for r in rows)
    return round(statistics.quantiles(latencies, n=100)[q - 1] if q < 100 else latencies[-1], 3)


if __name__ == "__main__":
    role_main()
