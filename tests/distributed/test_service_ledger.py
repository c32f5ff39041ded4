"""The shared ledger of a service AID, with real SQLite files and real locks (several instances in one process)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aun_runtime import AgentRegistrationError
from aun_runtime.distributed import _service_store
from aun_runtime.distributed._journal import JournalArchive
from aun_runtime.distributed._service_store import LEDGER_KEEP, Claim, ServiceLedger, ledger_path

AID = "svc.local"


def _ledger(tmp_path: Path, instance: str) -> tuple[ServiceLedger, JournalArchive]:
    journal = JournalArchive(tmp_path / f"{instance}.sqlite")
    ledger = ServiceLedger(
        ledger_path(tmp_path, AID),
        instance=instance,
        journal=journal.path,
        handled=lambda origin, seq: journal.service_handled(origin, AID, seq),
        aid=AID,
    )
    return ledger, journal


def _journal_handled(journal: JournalArchive, origin: str, seq: int) -> None:
    """What the journal of an instance commits with a handling of a service delivery."""
    db = sqlite3.connect(journal.path)
    db.execute("INSERT INTO aun_in_handled (origin, aid, seq) VALUES (?, ?, ?)", (origin, AID, seq))
    db.commit()
    db.close()


def _die(ledger: ServiceLedger) -> None:
    """What SIGKILL does to an instance's hold on the ledger: its lock goes, nothing is settled."""
    assert ledger._lock is not None
    ledger._lock.close()
    ledger._lock = None


def test_a_delivery_claimed_by_a_live_instance_is_left_to_it(tmp_path: Path) -> None:
    a, _ = _ledger(tmp_path, "a")
    b, _ = _ledger(tmp_path, "b")
    assert a.claim("src", [(1, 1), (2, 1)], in_order=False)[0] == [Claim.WON, Claim.WON]
    assert b.claim("src", [(1, 1), (2, 1), (3, 1)], in_order=False)[0] == [Claim.ELSEWHERE, Claim.ELSEWHERE, Claim.WON]


def test_in_order_claims_stop_at_a_delivery_held_elsewhere(tmp_path: Path) -> None:
    a, _ = _ledger(tmp_path, "a")
    b, _ = _ledger(tmp_path, "b")
    a.claim("src", [(2, 1)], in_order=False)
    verdicts, _ = b.claim("src", [(1, 1), (2, 1), (3, 1)], in_order=True)
    assert verdicts == [Claim.WON, Claim.ELSEWHERE, Claim.ELSEWHERE]


def test_done_moves_the_position_only_without_a_gap_whoever_handled_each(tmp_path: Path) -> None:
    a, _ = _ledger(tmp_path, "a")
    b, _ = _ledger(tmp_path, "b")
    a.claim("src", [(1, 1), (3, 1)], in_order=False)
    b.claim("src", [(2, 1)], in_order=False)
    assert a.done([("src", 1), ("src", 3)]) == {"src": 1}
    assert b.done([("src", 2)]) == {"src": 3}
    assert b.claim("src", [(2, 1), (4, 1)], in_order=False) == ([Claim.DONE, Claim.WON], 3)


def test_a_dead_instances_claim_passes_on_unless_its_journal_committed_the_handling(tmp_path: Path) -> None:
    a, journal_a = _ledger(tmp_path, "a")
    b, _ = _ledger(tmp_path, "b")
    a.claim("src", [(1, 1), (2, 1)], in_order=False)
    _journal_handled(journal_a, "src", 1)  # committed, killed before the ledger heard of it
    _die(a)
    verdicts, through = b.claim("src", [(1, 1), (2, 1)], in_order=False)
    assert verdicts == [Claim.DONE, Claim.WON]
    assert through == 1


def test_a_restarted_instance_settles_what_its_last_run_left(tmp_path: Path) -> None:
    a, journal_a = _ledger(tmp_path, "a")
    a.claim("src", [(1, 1), (2, 1)], in_order=False)
    _journal_handled(journal_a, "src", 1)
    _die(a)
    journal_a.close()
    again, _ = _ledger(tmp_path, "a")
    assert again.through("src") == 1  # its handled claim is done
    b, _ = _ledger(tmp_path, "b")
    assert b.claim("src", [(2, 1)], in_order=False)[0] == [Claim.WON]  # its other claim was released


def test_the_senders_base_says_what_was_handled_before(tmp_path: Path) -> None:
    a, _ = _ledger(tmp_path, "a")
    assert a.claim("src", [(7, 7), (6, 7)], in_order=False) == ([Claim.WON, Claim.DONE], 6)


def test_done_claims_are_pruned_far_below_the_position(tmp_path: Path) -> None:
    a, _ = _ledger(tmp_path, "a")
    count = LEDGER_KEEP + 50
    a.claim("src", [(n, 1) for n in range(1, count + 1)], in_order=False)
    assert a.done([("src", n) for n in range(1, count + 1)]) == {"src": count}
    kept = sqlite3.connect(ledger_path(tmp_path, AID)).execute("SELECT COUNT(*) FROM svc_claims").fetchone()[0]
    assert kept == LEDGER_KEEP


def test_an_instance_that_already_runs_elsewhere_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_service_store, "LOCK_WAIT", 0.2)
    running, _ = _ledger(tmp_path, "a")
    with pytest.raises(AgentRegistrationError, match="instance a already runs in another process"):
        _ledger(tmp_path, "a")
    running.close()
