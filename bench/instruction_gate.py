"""The instruction gate: fails when a delivery on an in-process core costs more than 3 % over the baseline.

Counts instructions per delivery with callgrind, for 1 and 10 subscribers on both in-process cores
(``aun_actor``: ``AUNActorRuntime``; ``aun_single_threaded``: ``AUNSingleThreadedRuntime``), the
workload of ``bench/runtime_throughput.py`` with every AUN rule on, and compares them with
``bench/instructions_baseline.json``. A count that grew more than 3 % fails, and so does a stage that
grew by more than 3 % of its delivery's count (a regression hidden behind a gain elsewhere); the
report names the stages that grew, largest first.

How it counts: one valgrind process per core (the two run side by side), so the interpreter's start
(about 1.5 billion instructions) is paid once. Inside it every workload runs twice, with a few and
with more messages, and a marker call (``os.getloadavg``, which nothing else on the path calls) makes
callgrind dump its counters between runs (``--dump-before=getloadavg``); the difference of the two
runs over the difference in deliveries is the cost per delivery, with start-up, registration and
shut-down cancelled out. Every thread is counted (the event loop and the archive's writer).
``PYTHONHASHSEED`` is pinned and each core's paths are warmed up first; instruction counts then hold
to a fraction of a percent from run to run on a loaded machine, where time does not.

The stages, each a difference of runs with stages replaced by no-ops one after another (so that they
are disjoint and add up to the whole): ``archive`` (every record call and the writer thread's
work), ``channel`` (dedup, the mention filter, the received record's call), ``dispatch`` (turn watch,
context variables, handler table, the handler), ``build`` (payload, id, validated envelope and its
JSON, run alone: one per message, so a tenth per delivery at ten subscribers) and ``send path``
(the rest: the send call, core publish and routing, mailbox, drain, endpoint checks).

Usage:
  ``python bench/instruction_gate.py``            count, compare, exit 1 on a regression
  ``python bench/instruction_gate.py --update``   count and rewrite the baseline (a change that must
                                                 cost more commits the new baseline with it, and
                                                 says why in its message)
  ``python bench/instruction_gate.py --baseline FILE``  compare with (or, with --update, write) FILE
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
BASELINE = BENCH / "instructions_baseline.json"
CORES = ("aun_actor", "aun_single_threaded")
FANOUTS = (1, 10)
#: Messages of the short and the long run of each workload, by fanout (deliveries differ by 400 and 1,200).
MESSAGES = {1: (100, 500), 10: (30, 150)}
#: Stages switched off one after another: each run's count minus the next one's is a stage.
STRIPPED = ("archive", "channel", "dispatch")
STAGES = ("build", "send path", "archive", "channel", "dispatch")
TOLERANCE = 0.03
MARKER = "getloadavg"


# -- inside valgrind -----------------------------------------------------------------------------


def _stage_targets(stage: str) -> list[tuple[Any, str, Callable[..., Any]]]:
    """The (owner, attribute, no-op) replacements that switch one stage off."""
    if stage == "archive":  # every record call, and so the writer thread's work
        from aun_runtime import Archive

        return [(Archive, "record", lambda *args, **kwargs: None)]
    if stage == "channel":  # dedup, the mention filter and the received record
        from aun_runtime.delivery._channel import Admission, Channel

        return [(Channel, "admit", lambda self, message: Admission.DELIVER)]
    from aun_runtime import AUNAgent  # dispatch: turn watch, context variables, handler table, handler

    async def dispatch(self: object, message: object, ctx: object) -> None:
        return None

    return [(AUNAgent, "_dispatch", dispatch)]


@contextmanager
def _without(stages: tuple[str, ...]) -> Iterator[None]:
    saved = []
    for stage in stages:
        for owner, name, replacement in _stage_targets(stage):
            saved.append((owner, name, owner.__dict__[name]))
            setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def _build(n: int) -> None:
    """What a send builds for each message, alone (as ``bench/delivery_instructions.py`` counts it)."""
    from aun_runtime.base._payload import coerce_payload
    from protocols.aun import AUNMessage, new_message_id

    for seq in range(1, n + 1):
        message_id = new_message_id()
        AUNMessage.assemble(
            message_id=message_id, from_aid="source.local", to="sink0.local",
            payload=coerce_payload("hello world", None), seq=seq, thread=message_id,
        ).to_json()


async def _workload(core: str, n: int, fanout: int) -> None:
    """One run of ``bench/runtime_throughput.py``'s workload on `core`, its archive written in full
    batches only: under valgrind a delivery takes fifty times as long, and the 50 ms flush timer would
    cut batches of a few records at points that move with the machine's load (as much as 3 % of a
    count from run to run); at full speed a batch fills long before its timer."""
    import runtime_throughput

    from aun_runtime import Archive, AUNActorRuntime, AUNRuntime, AUNSingleThreadedRuntime

    with tempfile.TemporaryDirectory() as tmp:
        archive = Archive(Path(tmp) / "archive.sqlite", flush_interval=3600)
        engine = AUNActorRuntime() if core == "aun_actor" else AUNSingleThreadedRuntime()
        await runtime_throughput.aun_on(AUNRuntime(archive=archive, core=engine), n, fanout)


def _mark() -> None:
    """Callgrind dumps its counters here (``--dump-before=getloadavg``): one dump per phase."""
    gc.collect()
    os.getloadavg()


def _count(core: str) -> None:
    """Run every phase of one core, a marker between phases; print the phases' names as JSON."""
    sys.path.insert(0, str(BENCH))
    phases: list[str] = []
    for fanout in FANOUTS:  # warm-up: every path once, imports and caches filled
        asyncio.run(_workload(core, MESSAGES[fanout][0], fanout))
    _build(50)
    _mark()
    for fanout in FANOUTS:
        for depth in range(len(STRIPPED) + 1):
            with _without(STRIPPED[:depth]):
                for n in MESSAGES[fanout]:
                    asyncio.run(_workload(core, n, fanout))
                    _mark()
                    phases.append(f"{fanout}/{depth}/{n}")
        for n in MESSAGES[fanout]:
            _build(n)
            _mark()
            phases.append(f"{fanout}/build/{n}")
    print(json.dumps(phases))


# -- outside: run, attribute, compare ------------------------------------------------------------


def _start(core: str, out: Path) -> subprocess.Popen[str]:
    command = [
        "valgrind", "--tool=callgrind", f"--dump-before={MARKER}", f"--callgrind-out-file={out}",
        sys.executable, __file__, "--count", core,
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _parts(out: Path) -> dict[int, int]:
    """Instructions of each dump, by its part number (part 1: start-up and warm-up)."""
    parts = {}
    for path in out.parent.glob(out.name + "*"):
        text = path.read_text(errors="replace")
        part = re.search(r"^part: (\d+)", text, re.MULTILINE)
        total = re.search(r"^summary: (\d+)", text, re.MULTILINE) or re.search(r"^totals: (\d+)", text, re.MULTILINE)
        if part is not None and total is not None:
            parts[int(part.group(1))] = int(total.group(1))
    return parts


def attribute(phases: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per-delivery counts by fanout: the total and each stage, from the phases' instruction counts."""
    result: dict[str, dict[str, int]] = {}
    for fanout in FANOUTS:
        small, large = MESSAGES[fanout]
        deliveries = (large - small) * fanout

        def per_delivery(kind: str) -> float:
            return (phases[f"{fanout}/{kind}/{large}"] - phases[f"{fanout}/{kind}/{small}"]) / deliveries  # noqa: B023

        runs = [per_delivery(str(depth)) for depth in range(len(STRIPPED) + 1)]
        build = per_delivery("build")
        stages = {name: runs[i] - runs[i + 1] for i, name in enumerate(STRIPPED)}
        stages["build"] = build
        stages["send path"] = runs[-1] - build
        result[str(fanout)] = {"total": round(runs[0]), **{name: round(stages[name]) for name in STAGES}}
    return result


def count() -> dict[str, dict[str, dict[str, int]]]:
    """Count both cores (side by side, one valgrind each): {core: {fanout: {total, stages...}}}."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = {core: (_start(core, Path(tmp) / f"{core}.out"), Path(tmp) / f"{core}.out") for core in CORES}
        results = {}
        for core, (process, out) in runs.items():
            stdout, stderr = process.communicate(timeout=900)
            if process.returncode != 0:
                raise RuntimeError(f"{core} under callgrind exited {process.returncode}:\n{stderr[-4000:]}")
            names = json.loads(stdout.strip().splitlines()[-1])
            parts = _parts(out)
            results[core] = attribute({name: parts[i + 2] for i, name in enumerate(names)})
    return results


def compare(baseline: dict[str, Any], counted: dict[str, Any], tolerance: float = TOLERANCE) -> list[str]:
    """What grew past the tolerance, one line each, naming the stages that grew; empty when none did."""
    failures = []
    for core in CORES:
        for fanout in map(str, FANOUTS):
            before, now = baseline[core][fanout], counted[core][fanout]
            allowed = before["total"] * tolerance
            grown = sorted(
                ((now[stage] - before[stage], stage) for stage in STAGES if now[stage] > before[stage]), reverse=True
            )
            stage_over = [stage for delta, stage in grown if delta > allowed]
            if now["total"] - before["total"] > allowed or stage_over:
                growth = ", ".join(f"{stage} +{delta:,} ({delta / before['total']:+.1%})" for delta, stage in grown)
                failures.append(
                    f"{core}, {fanout} subscriber(s): {now['total']:,} instructions per delivery, baseline "
                    f"{before['total']:,} ({now['total'] / before['total'] - 1:+.1%}, at most {tolerance:+.0%}); "
                    f"grew: {growth or 'no single stage'}"
                )
    return failures


def table(baseline: dict[str, Any] | None, counted: dict[str, Any]) -> str:
    """The counts per stage, with the baseline's beside them."""
    lines = [f"{'core':<20} {'subs':>4} {'stage':<10} {'now':>9} {'baseline':>9} {'change':>8}"]
    for core in CORES:
        for fanout in map(str, FANOUTS):
            for stage in ("total", *STAGES):
                now = counted[core][fanout][stage]
                before = baseline[core][fanout][stage] if baseline else None
                change = f"{(now - before) / baseline[core][fanout]['total']:+.1%}" if baseline and before is not None else ""
                shown = "" if before is None else f"{before:,}"
                lines.append(f"{core:<20} {fanout:>4} {stage:<10} {now:>9,} {shown:>9} {change:>8}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", metavar="CORE", choices=CORES, help=argparse.SUPPRESS)
    parser.add_argument("--update", action="store_true", help="rewrite the baseline with the counts")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    args = parser.parse_args()
    if args.count:
        _count(args.count)
        return 0
    counted = count()
    baseline = None if args.update else json.loads(args.baseline.read_text())
    print(table(baseline, counted))
    if args.update:
        record = {"unit": "instructions per delivery", "python": sys.version.split()[0], **counted}
        args.baseline.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.baseline}")
        return 0
    failures = compare(baseline, counted)
    for failure in failures:
        print("REGRESSION: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
