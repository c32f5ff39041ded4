"""How the host scales with workers: 1, 2 and 4 sink and source pairs on one host, ours against raw
autogen-ext's, same run.

Each pair is two worker processes, a source that floods ``--flood`` messages to its own sink's AID
(``sourceP.local`` -> ``sinkP.local``; raw: a topic of its own), and every source starts at once.
Per configuration: aggregate messages/s (every message of every pair, from the first send to the
last handling), CPU seconds per message summed over all processes (host and workers, Linux /proc),
and the host's share of that CPU. The roles are those of ``grpc_workers.py`` (``bench/_grpc.py``).
A service AID with several instances (one AID, load spread over workers) is not a feature of the
runtime yet, so it is not measured: the JSON says so. Prints one JSON line; on a shared machine,
trust the ratios.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from _grpc import Child, role, start_host, stop


def _run(kind: str, pairs: int, flood: int) -> dict[str, Any]:
    common = ["--flood", str(flood)]
    children: list[Child] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            host, address = start_host(kind, flood)
            children.append(host)
            sinks, sources = [], []
            for p in range(pairs):
                sinks.append(role(kind, "sink", address, "--archive", f"{tmp}/sink{p}.sqlite", *common, pair=str(p)))
                sources.append(role(kind, "source", address, "--archive", f"{tmp}/source{p}.sqlite", *common, pair=str(p)))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=2000, help="messages per source")
    parser.add_argument("--pairs", default="1,2,4", help="worker pairs per configuration")
    parser.add_argument("--repeat", type=int, default=2, help="runs per kind and configuration; the best counts")
    args = parser.parse_args()
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
                "service_aids": "not implemented",
            }
        )
    )


if __name__ == "__main__":
    main()
