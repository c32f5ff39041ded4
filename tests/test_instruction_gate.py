"""The instruction gate: no delivery on an in-process core may cost 3 % more instructions than the baseline.

`bench/instruction_gate.py` counts, with callgrind, the instructions of a delivery for 1 and 10
subscribers on the actor core and the single-threaded core, stage by stage, and compares them with
`bench/instructions_baseline.json`. Instructions, unlike time, hold to a fraction of a percent from
run to run on a loaded machine, so the gate can run beside the rest of the suite (it is a test file
for that reason: `make test` runs it on one of its workers while the others go on, and it adds
nothing to the suite's wall time). A change that must cost more rewrites the baseline in the same
commit (`python bench/instruction_gate.py --update`) and says why in its message.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _gate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("instruction_gate", ROOT / "bench" / "instruction_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("instruction_gate", module)
    spec.loader.exec_module(module)
    return module


gate = _gate()
BASELINE = json.loads(gate.BASELINE.read_text())


def _grown(stage: str, share: float, core: str = "aun_actor", fanout: str = "10") -> dict[str, object]:
    """The baseline with one stage (and so the total) grown by `share` of its delivery's total."""
    counted = copy.deepcopy(BASELINE)
    counts = counted[core][fanout]
    delta = round(counts["total"] * share)
    counts[stage] += delta
    counts["total"] += delta
    return counted


def test_the_baseline_holds_every_core_fanout_and_stage() -> None:
    for core in gate.CORES:
        for fanout in map(str, gate.FANOUTS):
            counts = BASELINE[core][fanout]
            assert set(counts) == {"total", *gate.STAGES}
            # The stages are disjoint and add up to the delivery (rounding aside).
            assert abs(sum(counts[stage] for stage in gate.STAGES) - counts["total"]) <= len(gate.STAGES)


def test_growth_within_the_tolerance_passes() -> None:
    assert gate.compare(BASELINE, _grown("dispatch", 0.02)) == []
    assert gate.compare(BASELINE, BASELINE) == []


def test_growth_past_the_tolerance_fails_and_names_the_stage() -> None:
    failures = gate.compare(BASELINE, _grown("archive", 0.05, core="aun_single_threaded", fanout="1"))
    assert len(failures) == 1
    assert failures[0].startswith("aun_single_threaded, 1 subscriber(s)")
    assert "grew: archive +" in failures[0] and "+5.0%" in failures[0]


def test_a_stage_grown_behind_a_gain_elsewhere_fails() -> None:
    counted = _grown("send path", 0.04)
    counted["aun_actor"]["10"]["build"] -= round(BASELINE["aun_actor"]["10"]["total"] * 0.04)
    counted["aun_actor"]["10"]["total"] = BASELINE["aun_actor"]["10"]["total"]
    failures = gate.compare(BASELINE, counted)
    assert len(failures) == 1 and "grew: send path +" in failures[0]


def test_no_delivery_costs_more_than_its_baseline() -> None:
    counted = gate.count()
    failures = gate.compare(BASELINE, counted)
    assert not failures, (
        "\n".join(failures)
        + "\n\n"
        + gate.table(BASELINE, counted)
        + f"\n\n(baseline counted on Python {BASELINE['python']}, this is {sys.version.split()[0]})"
        + "\nA change that must cost more rewrites the baseline: python bench/instruction_gate.py --update"
    )
