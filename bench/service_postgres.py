"""Benchmark: a service AID across machines with the PostgreSQL ledger, against the SQLite ledger on one
machine, in the same run; and the PostgreSQL archive's write cost against SQLite's.

* **Service AID.** ``svc.local`` (round robin, a handler doing a fixed amount of CPU work per
  message) receives ``--messages`` messages from one sender. The baseline is one instance with the
  SQLite ledger and its journal in an SQLite file, host, instance and sender on this machine
  (loopback), and two such instances as the control of what two cores allow. Then 1 and 2 instances whose journals and ledger are in one PostgreSQL database, with
  the database, the host, each instance and the sender each in a network namespace of its own (as
  root; elsewhere on loopback, and the JSON line says so). Per configuration: messages handled per
  second (from the sender's go to the last handling committed) and CPU per message, of the runtime's
  processes and, for PostgreSQL, of the server too; ratios against the baseline.
* **Archive writes.** ``--records`` records (a send and a receipt per message) written by an
  `Archive` on an SQLite file and on the PostgreSQL server (loopback): wall time and CPU per record,
  this process's and the server's; ratios PostgreSQL over SQLite.

Both on one 2-core machine: the server, the host and the instances share the cores, so the figures
are the cost of the work, not of a network between machines.

    python bench/service_postgres.py [--messages 1000] [--work 6000] [--records 40000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _grpc import Busy, Child

from aun_runtime import AUNMessage, RecordKind, TextPayload
from aun_runtime.distributed import worker_runtime
from aun_runtime.storage import open_storage
from aun_runtime.storage._archive import Archive
from aun_runtime.testing.infrastructure import (
    Namespace,
    PostgresServer,
    PrivateNetwork,
    namespaces_unavailable,
)

SERVICE = "svc.local"
HOST_PORT = 50051
PG_PORT = 5432


async def _role(role: str, host: str, archive: str, ledger: str | None, name: str, count: int, work: int) -> None:
    loop = asyncio.get_running_loop()
    if role == "instance":
        runtime = worker_runtime(host, archive=archive, name=name, services={SERVICE: "round_robin"}, service_dir=ledger)
        await runtime.register_agent(SERVICE, lambda: Busy(work))
        await runtime.start()
        print("READY", flush=True)
    else:
        runtime = worker_runtime(host, archive=archive)
        inbox = await runtime.open_inbox(f"{name}.local")
        await runtime.start()
        print("READY", flush=True)
        if (await loop.run_in_executor(None, sys.stdin.readline)).strip() == "go":
            for n in range(count):
                await inbox.send(SERVICE, f"{n} {'x' * 40}")
    await loop.run_in_executor(None, sys.stdin.readline)  # "exit"
    await runtime.stop()
    runtime.archive.close()


def _child(prefix: Sequence[str], name: str, *args: str) -> Child:
    return Child([*prefix, sys.executable, *args], name)


def _server_cpu(server: PostgresServer) -> float:
    """CPU seconds of every process of the server so far (the postmaster and its backends)."""
    assert server.directory is not None
    master = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == master or int(fields[1]) == master:  # fields[1]: the parent's pid
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _handled(location: str) -> int:
    try:
        storage = open_storage(location, read_only=True)
    except FileNotFoundError:
        return 0
    try:
        return int(storage.fetch("SELECT COUNT(*) FROM records WHERE owner = ? AND kind = 'received'", (SERVICE,))[0][0])
    except Exception:
        return 0  # no tables yet
    finally:
        storage.close()


def _run_service(instances: int, postgres: bool, messages: int, work: int, network: PrivateNetwork | None) -> dict[str, Any]:
    children: list[Child] = []
    server: PostgresServer | None = None
    me = Path(__file__).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        machines: dict[str, Namespace] = {}
        if network is not None and postgres:
            run = len(network.namespaces)  # namespace names are unique per network
            machines = {label: network.add(f"{label}r{run}") for label in ["db", "host", "sender"]}
            machines.update({f"i{n}": network.add(f"i{n}r{run}") for n in range(instances)})

        def prefix(label: str) -> list[str]:
            return machines[label].command([]) if label in machines else []

        def address(label: str) -> str:
            return machines[label].address if label in machines else "127.0.0.1"

        try:
            if postgres:
                db_host = address("db")
                server = PostgresServer(host=db_host, port=PG_PORT if machines else None, prefix=prefix("db")).start()
                url = server.url("postgres")
                local_url = f"postgresql://postgres@/postgres?host={server.socket_dir}&port={server.port}"
            host_address = f"{address('host')}:{HOST_PORT}" if machines else "127.0.0.1:0"
            host = _child(prefix("host"), "host", "-m", "aun_runtime", "host", "--address", host_address)
            children.append(host)
            host_address = host.expect("aun-runtime host ready on ").split()[0]
            role = [str(me), "--role"]
            for n in range(instances):
                archive = url if postgres else f"{tmp}/i{n}.sqlite"
                ledger = [] if postgres else ["--ledger", tmp]
                child = _child(prefix(f"i{n}"), f"i{n}", *role, "instance", "--host", host_address, "--archive", archive,
                               "--name", f"i{n}", "--work", str(work), *ledger)  # fmt: skip
                child.expect("READY")
                children.append(child)
            sender = _child(prefix("sender"), "sender", *role, "sender", "--host", host_address,
                            "--archive", f"{tmp}/sender.sqlite", "--name", "sender", "--count", str(messages))  # fmt: skip
            sender.expect("READY")
            children.append(sender)
            where = [local_url] if postgres else [f"{tmp}/i{n}.sqlite" for n in range(instances)]
            before = [c.cpu_seconds() for c in children]
            server_before = _server_cpu(server) if server else 0.0
            start = time.monotonic()
            sender.tell("go")
            while sum(_handled(w) for w in where) < messages:
                time.sleep(0.02)
            span = time.monotonic() - start
            cpu = sum(c.cpu_seconds() - b for c, b in zip(children, before, strict=True))
            server_cpu = (_server_cpu(server) - server_before) if server else 0.0
            for child in children[1:]:
                child.tell("exit")
            for child in children[1:]:
                child.proc.wait(timeout=60)
            host.proc.terminate()
            host.proc.wait(timeout=30)
        finally:
            for child in children:
                child.kill()
            if server is not None:
                server.stop()
    return {
        "instances": instances,
        "ledger": "postgresql" if postgres else "sqlite",
        "apart": bool(machines),
        "msgs_per_s": round(messages / span, 1),
        "cpu_ms_per_msg": round(cpu * 1000 / messages, 3),
        "server_cpu_ms_per_msg": round(server_cpu * 1000 / messages, 3),
    }


async def _awaited_calls(url: str, calls: int) -> tuple[float, float]:
    """asyncpg awaited on the caller's own loop: seconds of wall time and of CPU for `calls` round trips."""
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(calls):
            await connection.fetchval("SELECT 1")
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        await connection.close()


def _session_calls(url: str, calls: int) -> dict[str, Any]:
    """What a statement costs through `PostgresStorage` (asyncpg on a thread of its own, the caller
    waiting) against asyncpg awaited on the caller's loop: the price of one synchronous interface."""
    storage = open_storage(url)
    try:
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(calls):
            storage.fetch("SELECT 1")
        threaded = (time.perf_counter() - start, time.process_time() - cpu)
    finally:
        storage.close()
    awaited = asyncio.run(_awaited_calls(url, calls))
    return {
        "threaded_us_per_call": round(threaded[0] * 1e6 / calls, 1),
        "awaited_us_per_call": round(awaited[0] * 1e6 / calls, 1),
        "threaded_cpu_us_per_call": round(threaded[1] * 1e6 / calls, 1),
        "awaited_cpu_us_per_call": round(awaited[1] * 1e6 / calls, 1),
        "wall_ratio": round(threaded[0] / awaited[0], 3),
        "cpu_ratio": round(threaded[1] / awaited[1], 3),
    }


def _archive_writes(records: int) -> dict[str, Any]:
    messages = [AUNMessage(from_aid="a.local", to="b.local", payload=TextPayload(text=f"message {n} " + "x" * 80)) for n in range(records // 2)]
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as server:
        for kind, location in (("sqlite", f"{tmp}/a.sqlite"), ("postgresql", server.url("postgres"))):
            archive = Archive(location)
            server_before = _server_cpu(server)
            cpu_before, start = time.process_time(), time.perf_counter()
            for message in messages:
                archive.record("a.local", RecordKind.SENT, message)
                archive.record("b.local", RecordKind.RECEIVED, message)
            archive.flush()
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu_before
            server_cpu = _server_cpu(server) - server_before if kind == "postgresql" else 0.0
            assert archive.count() == records
            archive.close()
            results[kind] = {
                "records_per_s": round(records / wall),
                "client_cpu_us_per_record": round(cpu * 1e6 / records, 2),
                "server_cpu_us_per_record": round(server_cpu * 1e6 / records, 2),
            }
        calls = _session_calls(server.url("postgres"), 5000)
    pg, lite = results["postgresql"], results["sqlite"]
    return {
        "session_calls": calls,
        **results,
        "throughput_ratio": round(pg["records_per_s"] / lite["records_per_s"], 3),
        "client_cpu_ratio": round(pg["client_cpu_us_per_record"] / lite["client_cpu_us_per_record"], 3),
        "total_cpu_ratio": round(
            (pg["client_cpu_us_per_record"] + pg["server_cpu_us_per_record"]) / lite["client_cpu_us_per_record"], 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--work", type=int, default=6000, help="SHA-256 rounds per message in the handler")
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration (the best is kept)")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--host", help=argparse.SUPPRESS)
    parser.add_argument("--archive", help=argparse.SUPPRESS)
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        asyncio.run(_role(args.role, args.host, args.archive, args.ledger, args.name, args.count, args.work))
        return
    reason = namespaces_unavailable()
    network = PrivateNetwork() if reason is None else None
    try:
        configs = [(1, False), (2, False), (1, True), (2, True)]
        best: list[dict[str, Any]] = []
        for instances, postgres in configs:
            runs = [_run_service(instances, postgres, args.messages, args.work, network) for _ in range(args.repeat)]
            top = max(runs, key=lambda r: r["msgs_per_s"])
            best.append({**top, "cpu_ms_per_msg": min(r["cpu_ms_per_msg"] for r in runs)})
    finally:
        if network is not None:
            network.close()
    base = best[0]

    def label(run: dict[str, Any]) -> str:
        return f"{run['ledger']}-{run['instances']}"

    print(
        json.dumps(
            {
                "bench": "service_postgres",
                "messages": args.messages,
                "sha256_rounds_per_msg": args.work,
                "cores": os.cpu_count(),
                "namespaces": "used" if network is not None else f"not used: {reason}",
                "runs": best,
                "throughput_ratio": {label(r): round(r["msgs_per_s"] / base["msgs_per_s"], 3) for r in best},
                "cpu_per_msg_ratio": {label(r): round(r["cpu_ms_per_msg"] / base["cpu_ms_per_msg"], 3) for r in best},
                "cpu_per_msg_ratio_with_server": {
                    label(r): round((r["cpu_ms_per_msg"] + r["server_cpu_ms_per_msg"]) / base["cpu_ms_per_msg"], 3)
                    for r in best
                },
                "archive_writes": _archive_writes(args.records),
                "repeat": args.repeat,
            }
        )
    )


if __name__ == "__main__":
    main()
