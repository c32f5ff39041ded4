"""How the host scales with workers: 1, 2 and 4 sink and source pairs on one host, ours against raw
autogen-ext's, same run.

Each pair is two worker processes, a source that floods ``--flood`` messages to its own sink's AID
(``sourceP.local`` -> ``sinkP.local``; raw: a topic of its own), and every source starts at once.
Per configuration: aggregate messages/s (every message of every pair, from the first send to the
last handling), CPU seconds per message summed over all processes (host and workers, Linux /proc),
and the host's share of that CPU. The roles are those of ``grpc_workers.py`` (``bench/_grpc.py``).

Then a service AID: ``svc.local`` held by 1, 2 and 4 instance processes (round robin, one shared
ledger), each message costing ``--work`` rounds of SHA-256 in the handler (CPU-bound work), fed by
``--senders`` source processes of ``--service-messages`` messages each. Per configuration:
messages/s from the first send until the instances' archives hold every message received, and CPU
seconds per message over all processes; both as ratios to 1 instance in the same run. The same
work on one worker holding the AID plainly (no ledger) is the cost of the ledger (``plain``). Instances beyond the
machine's cores cannot add throughput, so the JSON also gives the core count. Prints one JSON line;
on a shared machine, trust the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _grpc import Busy, Child, start_host, stop
from _grpc import role as pair_role

from aun_runtime.distributed import worker_runtime

SERVICE = "svc.local"


def _run(kind: str, pairs: int, flood: int) -> dict[str, Any]:
    common = ["--flood", str(flood)]
    children: list[Child] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            host, address = start_host(kind, flood)
            children.append(host)
            sinks, sources = [], []
            for p in range(pairs):
                sinks.append(pair_role(kind, "sink", address, "--archive", f"{tmp}/sink{p}.sqlite", *common, pair=str(p)))
                sources.append(pair_role(kind, "source", address, "--archive", f"{tmp}/source{p}.sqlite", *common, pair=str(p)))
            children += sinks + sources
            before = [c.cpu_seconds() for c in children]
            for source in sources:
                source.tell("go")
            rows = [row for sink in sinks for row in json.loads(sink.expect("PHASE "))]
            for source in sources:
                source.expect("SENT")
            cpu = [c.cpu_seconds() - b for c, b in zip(children, before, strict=True)]
            stop(host, sources + sinks)
        finally:
            for child in children:
                child.kill()
    span = (max(r[2] for r in rows) - min(r[1] for r in rows)) / 1e9
    return {
        "pairs": pairs,
        "msgs_per_s": round(len(rows) / span, 1),
        "cpu_ms_per_msg": round(sum(cpu) * 1000 / len(rows), 3),
        "host_cpu_share": round(cpu[0] / sum(cpu), 3),
        "delivered": len(rows),
    }


# -- the service AID: its roles (run as ``grpc_scale.py --service-role ...``) and its runs ----------------


async def _service_role(role: str, host: str, archive: str, ledgers: str, count: int, work: int, name: str) -> None:
    loop = asyncio.get_running_loop()
    if role in ("instance", "plain"):
        services = {SERVICE: "round_robin"} if role == "instance" else None
        runtime = worker_runtime(host, archive=archive, services=services, service_dir=ledgers)
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
            print("SENT", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)  # "exit"
    await runtime.stop()
    runtime.archive.close()


def _service_child(tmp: str, address: str, role: str, name: str, count: int, work: int) -> Child:
    args = [sys.executable, str(Path(__file__).resolve()), "--service-role", role, "--host", address]
    args += ["--archive", f"{tmp}/{name}.sqlite", "--ledgers", tmp, "--count", str(count), "--work", str(work), "--name", name]
    child = Child(args, f"service-{name}")
    child.expect("READY")
    return child


def _received(archive: str) -> int:
    """Messages the service's agent received, as this instance's archive has them committed."""
    try:
        db = sqlite3.connect(f"file:{archive}?mode=ro", uri=True, timeout=5)
    except sqlite3.OperationalError:
        return 0
    try:
        sql = "SELECT COUNT(*) FROM records WHERE owner = ? AND kind = 'received'"
        return int(db.execute(sql, (SERVICE,)).fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def _run_service(instances: int, senders: int, messages: int, work: int) -> dict[str, Any]:
    """``instances`` 0: one worker that holds the AID plainly."""
    total = senders * messages
    children: list[Child] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            host, address = start_host("aun", messages)
            children.append(host)
            role = "instance" if instances else "plain"
            children += [_service_child(tmp, address, role, f"instance{i}", 0, work) for i in range(max(instances, 1))]
            sources = [_service_child(tmp, address, "sender", f"sender{s}", messages, work) for s in range(senders)]
            children += sources
            before = [c.cpu_seconds() for c in children]
            start = time.monotonic()
            for source in sources:
                source.tell("go")
            archives = [f"{tmp}/instance{i}.sqlite" for i in range(max(instances, 1))]
            while sum(_received(a) for a in archives) < total:
                time.sleep(0.01)
            span = time.monotonic() - start
            cpu = [c.cpu_seconds() - b for c, b in zip(children, before, strict=True)]
            stop(host, children[1:])
        finally:
            for child in children:
                child.kill()
    return {
        "instances": instances,
        "msgs_per_s": round(total / span, 1),
        "cpu_ms_per_msg": round(sum(cpu) * 1000 / total, 3),
        "handled": total,
    }


def _service_curve(configs: list[int], senders: int, messages: int, work: int, repeat: int) -> dict[str, Any]:
    best: list[dict[str, Any]] = []
    for instances in [0, *configs]:
        runs = [_run_service(instances, senders, messages, work) for _ in range(repeat)]
        top = max(runs, key=lambda r: r["msgs_per_s"])
        best.append({**top, "cpu_ms_per_msg": min(r["cpu_ms_per_msg"] for r in runs)})
    plain, best = best[0], best[1:]
    base = best[0]
    return {
        "policy": "round_robin",
        "senders": senders,
        "messages_per_sender": messages,
        "sha256_rounds_per_msg": work,
        "cores": os.cpu_count(),
        "plain": plain,
        "runs": best,
        "ledger_cpu_ratio": round(base["cpu_ms_per_msg"] / plain["cpu_ms_per_msg"], 3),
        "ledger_throughput_ratio": round(base["msgs_per_s"] / plain["msgs_per_s"], 3),
        "throughput_ratio": {str(r["instances"]): round(r["msgs_per_s"] / base["msgs_per_s"], 3) for r in best},
        "cpu_per_msg_ratio": {str(r["instances"]): round(r["cpu_ms_per_msg"] / base["cpu_ms_per_msg"], 3) for r in best},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=2000, help="messages per source")
    parser.add_argument("--pairs", default="1,2,4", help="worker pairs per configuration")
    parser.add_argument("--repeat", type=int, default=2, help="runs per kind and configuration; the best counts")
    parser.add_argument("--instances", default="1,2,4", help="service instances per configuration")
    parser.add_argument("--senders", type=int, default=2, help="source processes sending to the service AID")
    parser.add_argument("--service-messages", type=int, default=500, help="messages per sender to the service AID")
    parser.add_argument("--work", type=int, default=6000, help="SHA-256 rounds per message in the service's handler")
    parser.add_argument("--service-role", help=argparse.SUPPRESS)
    for internal in ("--host", "--archive", "--ledgers", "--name"):
        parser.add_argument(internal, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.service_role:
        asyncio.run(_service_role(args.service_role, args.host, args.archive, args.ledgers, args.count, args.work, args.name))
        return
    configs = [int(n) for n in args.pairs.split(",")]
    best: dict[str, list[dict[str, Any]]] = {"raw": [], "aun": []}
    for pairs in configs:
        runs: dict[str, list[dict[str, Any]]] = {"raw": [], "aun": []}
        for _ in range(args.repeat):
            for kind in ("raw", "aun"):  # interleaved, so that machine noise hits both alike
                runs[kind].append(_run(kind, pairs, args.flood))
        for kind, results in runs.items():
            top = max(results, key=lambda r: r["msgs_per_s"])
            best[kind].append({**top, "cpu_ms_per_msg": min(r["cpu_ms_per_msg"] for r in results)})
    print(
        json.dumps(
            {
                "bench": "grpc_scale",
                "flood_per_pair": args.flood,
                "raw_autogen": best["raw"],
                "aun_workers": best["aun"],
                "throughput_ratio": {
                    str(a["pairs"]): round(a["msgs_per_s"] / r["msgs_per_s"], 3) for r, a in zip(best["raw"], best["aun"], strict=True)
                },
                "cpu_per_msg_ratio": {
                    str(a["pairs"]): round(a["cpu_ms_per_msg"] / r["cpu_ms_per_msg"], 3)
                    for r, a in zip(best["raw"], best["aun"], strict=True)
                },
                "service_aids": _service_curve(
                    [int(n) for n in args.instances.split(",")], args.senders, args.service_messages, args.work, args.repeat
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
