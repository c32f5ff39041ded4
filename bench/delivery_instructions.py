"""Instructions per delivery, counted by callgrind: repeatable on a loaded machine where time is not.

Runs one workload of ``bench/runtime_throughput.py`` under ``valgrind --tool=callgrind`` twice,
with ``--small`` and ``--large`` messages, and divides the difference of the two totals (every
thread: the event loop and the archive's writer) by the difference in deliveries, so that start-up,
imports and registration cancel out. ``--without`` runs the same workload with one stage replaced
by a no-op, for attribution only (``archive``: the archive's record calls and its writer;
``channel``: dedup, filter and received record; ``dispatch``: turn watch, context and handler
table); what a stage costs is the difference from the full run. The system ``build`` is what a
send builds per message, alone (payload, id, validated envelope, its JSON). Prints one JSON line.

Usage: ``python bench/delivery_instructions.py [--fanout 1 10] [--systems raw_autogen aun_actor]``
(``python bench/delivery_instructions.py --run SYSTEM FANOUT N`` is what runs under valgrind).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import runtime_throughput


async def _build(n: int, fanout: int) -> float:
    """What a send builds for each message, alone: its payload, id and envelope (validated), and its
    JSON (made once per message, for the archive and the wire)."""
    from aun_runtime.base._payload import coerce_payload
    from protocols.aun import AUNMessage, new_message_id

    for seq in range(1, n + 1):
        message_id = new_message_id()
        AUNMessage.assemble(
            message_id=message_id, from_aid="source.local", to="sink0.local", payload=coerce_payload("hello world", None),
            seq=seq, thread=message_id,
        ).to_json()
    return 0.0


def _strip(without: str) -> None:
    """Replace one stage by a no-op (attribution only: the difference from the full run is its cost)."""
    if without == "archive":  # every record call, and so the writer thread's work
        from aun_runtime import Archive

        Archive.record = lambda *args, **kwargs: None  # type: ignore[method-assign]
    elif without == "channel":  # dedup, the mention filter and the received record
        from aun_runtime.delivery._channel import Admission, Channel

        Channel.admit = lambda self, message: Admission.DELIVER  # type: ignore[method-assign]
    elif without == "dispatch":  # the turn watch, the context variables and the handler table
        from aun_runtime import AUNAgent

        async def dispatch(self: object, message: object, ctx: object) -> None:
            return None

        AUNAgent._dispatch = dispatch  # type: ignore[assignment, method-assign]


def _run(system: str, fanout: int, n: int, without: str | None) -> None:
    if without:
        _strip(without)
    workload = _build if system == "build" else runtime_throughput.WORKLOADS[system]
    asyncio.run(workload(n, fanout))


def _instructions(system: str, fanout: int, n: int, without: str | None) -> tuple[int, int]:
    """Total instructions (all threads) of one run, and those of the threads other than the main one."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}",
            sys.executable, __file__, "--run", system, str(fanout), str(n),
        ]
        if without:
            command += ["--without", without]
        subprocess.run(command, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        totals = []
        for part in sorted(Path(tmp).glob("callgrind.out*")):
            match = re.search(r"^summary: (\d+)", part.read_text(errors="replace"), re.MULTILINE)
            if match is None:
                match = re.search(r"^totals: (\d+)", part.read_text(errors="replace"), re.MULTILINE)
            if match is not None:
                totals.append((part.name, int(match.group(1))))
    total = sum(count for _, count in totals)
    main = next((count for name, count in totals if name.endswith("-01")), total)
    return total, total - main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", nargs=3, metavar=("SYSTEM", "FANOUT", "N"))
    parser.add_argument("--without", choices=["archive", "channel", "dispatch"])
    parser.add_argument("--fanout", type=int, nargs="*", default=[1, 10])
    parser.add_argument("--systems", nargs="*", default=["raw_autogen", "aun_actor"])
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=2500)
    args = parser.parse_args()
    if args.run:
        system, fanout, n = args.run
        _run(system, int(fanout), int(n), args.without)
        return
    results: dict[str, dict[str, dict[str, int]]] = {}
    for system in args.systems:
        for fanout in args.fanout:
            small = _instructions(system, fanout, args.small, args.without)
            large = _instructions(system, fanout, args.large, args.without)
            deliveries = (args.large - args.small) * fanout
            results.setdefault(system, {})[str(fanout)] = {
                "per_delivery": round((large[0] - small[0]) / deliveries),
                "other_threads_per_delivery": round((large[1] - small[1]) / deliveries),
            }
    print(json.dumps({"bench": "delivery_instructions", "without": args.without, "results": results}))


if __name__ == "__main__":
    main()
