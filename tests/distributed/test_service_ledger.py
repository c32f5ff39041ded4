"""The shared ledger of a service AID, on both stores: real SQLite files and real file locks, and a
real PostgreSQL server with its sessions' advisory locks (several instances in one process)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from aun_runtime import AgentRegistrationError, FencedError, StorageSessionLostError
from aun_runtime.distributed import _journal, _service_liveness, _service_store
from aun_runtime.distributed._journal import DELIVERY, Delivery, JournalArchive
from aun_runtime.distributed._service_store import Claim, ServiceLedger, open_ledger
from aun_runtime.storage._scoped_sql import ScopedSQL
from aun_runtime.testing.infrastructure import ExternalPostgres, PostgresServer

AID = "svc.local"


@dataclass
class Place:
    """Where the instances of one test keep their journals and ledger: files in a directory, or one database."""

    directory: Path
    url: str | None = None
    server: ExternalPostgres | PostgresServer | None = None

    def journal(self, instance: str) -> str:
        return self.url or str(self.directory / f"{instance}.sqlite")


@pytest.fixture(params=["sqlite", "postgresql"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "sqlite":
        return Place(tmp_path)
    return Place(tmp_path, request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_server"))


def _ledger(place: Place, instance: str) -> tuple[ServiceLedger, JournalArchive]:
    journal = JournalArchive(place.journal(instance), worker=instance)
    return open_ledger(place.url, aid=AID, instance=instance, journal=journal), journal


def _journal_handled(journal: JournalArchive, origin: str, seq: int) -> None:
    """What the journal of an instance commits with a handling of a service delivery."""
    scope = ScopedSQL("worker" if journal.storage_kind == "postgresql" else None, journal.worker_name())
    journal.storage.execute(
        scope.sql("INSERT INTO aun_in_handled ({cols}origin, aid, seq) VALUES ({vals}?, ?, ?)"),
        (*scope.args, origin, AID, seq),
    )


def _die(place: Place, ledger: ServiceLedger, journal: JournalArchive) -> None:
    """What SIGKILL does to an instance's hold on the ledger: its lock goes, nothing is settled.

    On PostgreSQL that is its journal's session ending, as the server ends it for a process that
    died or was cut off."""
    if place.server is None:
        ledger._liveness.close()
        return
    pid = journal.storage.backend_pid  # type: ignore[attr-defined]
    assert place.server.sql(f"SELECT pg_terminate_backend({pid}, 10000)").strip() == "t"


def test_a_delivery_claimed_by_a_live_instance_is_left_to_it(place: Place) -> None:
    a, _ = _ledger(place, "a")
    b, _ = _ledger(place, "b")
    assert a.claim("src", [(1, 1), (2, 1)], in_order=False)[0] == [Claim.WON, Claim.WON]
    assert b.claim("src", [(1, 1), (2, 1), (3, 1)], in_order=False)[0] == [Claim.ELSEWHERE, Claim.ELSEWHERE, Claim.WON]


def test_in_order_claims_stop_at_a_delivery_held_elsewhere(place: Place) -> None:
    a, _ = _ledger(place, "a")
    b, _ = _ledger(place, "b")
    a.claim("src", [(2, 1)], in_order=False)
    verdicts, _ = b.claim("src", [(1, 1), (2, 1), (3, 1)], in_order=True)
    assert verdicts == [Claim.WON, Claim.ELSEWHERE, Claim.ELSEWHERE]


def test_done_moves_the_position_only_without_a_gap_whoever_handled_each(place: Place) -> None:
    a, _ = _ledger(place, "a")
    b, _ = _ledger(place, "b")
    a.claim("src", [(1, 1), (3, 1)], in_order=False)
    b.claim("src", [(2, 1)], in_order=False)
    assert a.done([("src", 1), ("src", 3)]) == {"src": 1}
    assert b.done([("src", 2)]) == {"src": 3}
    assert b.claim("src", [(2, 1), (4, 1)], in_order=False) == ([Claim.DONE, Claim.WON], 3)


def test_a_dead_instances_claim_passes_on_unless_its_journal_committed_the_handling(place: Place) -> None:
    a, journal_a = _ledger(place, "a")
    b, _ = _ledger(place, "b")
    a.claim("src", [(1, 1), (2, 1)], in_order=False)
    _journal_handled(journal_a, "src", 1)  # committed, killed before the ledger heard of it
    _die(place, a, journal_a)
    verdicts, through = b.claim("src", [(1, 1), (2, 1)], in_order=False)
    assert verdicts == [Claim.DONE, Claim.WON]
    assert through == 1


def test_a_restarted_instance_settles_what_its_last_run_left(place: Place) -> None:
    a, journal_a = _ledger(place, "a")
    a.claim("src", [(1, 1), (2, 1)], in_order=False)
    _journal_handled(journal_a, "src", 1)
    _die(place, a, journal_a)
    journal_a.close()
    again, _ = _ledger(place, "a")
    assert again.through("src") == 1  # its handled claim is done
    b, _ = _ledger(place, "b")
    assert b.claim("src", [(2, 1)], in_order=False)[0] == [Claim.WON]  # its other claim was released


def test_the_senders_base_says_what_was_handled_before(place: Place) -> None:
    a, _ = _ledger(place, "a")
    assert a.claim("src", [(7, 7), (6, 7)], in_order=False) == ([Claim.WON, Claim.DONE], 6)


def test_done_claims_are_pruned_far_below_the_position(place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_service_store, "LEDGER_KEEP", 100)  # the rule, not the size, is under test
    a, _ = _ledger(place, "a")
    count = 150
    a.claim("src", [(n, 1) for n in range(1, count + 1)], in_order=False)
    assert a.done([("src", n) for n in range(1, count + 1)]) == {"src": count}
    assert a._db.fetch("SELECT COUNT(*) FROM svc_claims")[0][0] == 100


def test_an_instance_that_already_runs_elsewhere_is_refused(place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_service_liveness, "LOCK_WAIT", 0.2)
    monkeypatch.setattr(_journal, "LIVE_LOCK_WAIT", 0.2)
    running, _ = _ledger(place, "a")
    with pytest.raises(AgentRegistrationError, match="a already runs in another process"):
        _ledger(place, "a")
    running.close()


def _handle(journal: JournalArchive, origin: str, seq: int) -> None:
    """A service delivery handled and committed by the journal, as a worker does it."""
    scope = Delivery(origin, AID, seq, service=True)
    token = DELIVERY.set(scope)
    journal.record_thought(AID, f"handling {seq}")
    DELIVERY.reset(token)
    journal.seal(scope, None)
    journal.flush()


@pytest.fixture
def shared(tmp_path: Path, postgres_url: str, postgres_server: ExternalPostgres | PostgresServer) -> Place:
    """One PostgreSQL database (a session to lose, and a lock to fence with, are PostgreSQL's)."""
    return Place(tmp_path, postgres_url, postgres_server)


def test_an_instance_cut_off_from_the_database_cannot_commit_and_when_back_does_not_handle_again(
    shared: Place,
) -> None:
    place = shared
    a, journal_a = _ledger(place, "a")
    b, journal_b = _ledger(place, "b")
    assert a.claim("src", [(1, 1), (2, 1)], in_order=True)[0] == [Claim.WON, Claim.WON]
    _handle(journal_a, "src", 1)
    assert a.done([("src", 1)]) == {"src": 1}
    _die(place, a, journal_a)  # the server ended its session: cut off for longer than the session timeout
    assert b.claim("src", [(2, 1)], in_order=True)[0] == [Claim.WON]  # its claim passed on
    with pytest.raises(StorageSessionLostError):  # its late commit of the handling fails
        _handle(journal_a, "src", 2)
    _handle(journal_b, "src", 2)
    assert b.done([("src", 2)]) == {"src": 2}

    again, journal_again = _ledger(place, "a")  # back, as a new session
    assert again.claim("src", [(1, 1), (2, 1)], in_order=True) == ([Claim.DONE, Claim.DONE], 2)
    handled = journal_again.storage.fetch("SELECT worker, seq FROM aun_in_handled ORDER BY seq")
    assert handled == [("a", 1), ("b", 2)]  # each once, from the shared store


def test_a_commit_that_finds_the_lock_gone_is_fenced(shared: Place) -> None:
    place = shared
    a, journal_a = _ledger(place, "a")
    assert a.claim("src", [(1, 1)], in_order=False)[0] == [Claim.WON]
    journal_a.storage.fetch("SELECT pg_advisory_unlock(?, ?)", (_journal.LIVE_LOCK_CLASS, journal_a.live_lock))
    with pytest.raises(FencedError):
        _handle(journal_a, "src", 1)
    with pytest.raises(FencedError):
        a.claim("src", [(2, 1)], in_order=False)
    assert journal_a.storage.fetch("SELECT COUNT(*) FROM aun_in_handled")[0][0] == 0


def test_an_instance_whose_lease_ran_out_is_fenced_and_its_claim_passes_on(shared: Place) -> None:
    place = shared
    a, journal_a = _ledger(place, "a")
    b, journal_b = _ledger(place, "b")
    assert a.claim("src", [(1, 1), (2, 1)], in_order=True)[0] == [Claim.WON, Claim.WON]
    _handle(journal_a, "src", 1)
    journal_a.renew_lease()  # renewed: its session alive and its lease running, its claim is its own
    assert b.claim("src", [(2, 1)], in_order=True)[0] == [Claim.ELSEWHERE]
    # Frozen: its session lives on (its kernel answers), but its loop renews nothing any more.
    journal_b.storage.execute("UPDATE aun_leases SET until = clock_timestamp() - interval '1 second' WHERE worker = 'a'")
    assert b.claim("src", [(1, 1), (2, 1)], in_order=True)[0] == [Claim.DONE, Claim.WON]  # settled from a's journal
    with pytest.raises(StorageSessionLostError):  # woken, it commits nothing: its session was ended
        _handle(journal_a, "src", 2)
    _handle(journal_b, "src", 2)
    assert b.done([("src", 1), ("src", 2)]) == {"src": 2}
    handled = journal_b.storage.fetch("SELECT worker, seq FROM aun_in_handled ORDER BY seq")
    assert handled == [("a", 1), ("b", 2)]
