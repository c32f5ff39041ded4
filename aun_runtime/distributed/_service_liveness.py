"""Proof that a service AID's instance is dead, and what it handled: on one machine, or across several.

The ledger (`._service_store`) passes a delivery claimed by another instance to the one that asks
only when that instance is *proven* dead, and settles the claim from what the dead instance
committed. Two proofs, one interface:

* `FileLiveness` (instances on one machine, an SQLite ledger file): each instance holds an
  exclusive `flock` on its own lock file beside the ledger; the kernel lets go of it when the
  process ends, SIGKILL included. What a dead instance handled is read from its journal file, whose
  path the ledger records.
* `SessionLiveness` (instances on any machines, the ledger in the shared database of their
  journals, PostgreSQL): each worker's journal session holds the worker's advisory lock (see `._journal`);
  the server lets go of it when the session ends: when the process dies, or within
  `SESSION_TIMEOUT` seconds (`aun_runtime.storage._postgres`) once the server finds it cut off. What a dead instance handled is
  read from its journal rows in the same database. A session outlives a process that is frozen
  (SIGSTOP, a blocked event loop), since its kernel still answers: so each worker also renews a
  lease from its own event loop (`._journal.LEASE`), and an instance whose lease ran out while its
  session holds the lock has that session ended by the instance that finds its claims
  (`pg_terminate_backend`, allowed between sessions of one role). With the session, its lock, its
  uncommitted work and any later commit of it are gone: it is fenced, and taken for dead.

In both, whoever took a dead instance's lock holds it while it settles that instance's claim, so
the instance cannot start again (and settle the same claim) meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol

from ..base._errors import AgentRegistrationError
from ..storage import Storage, open_storage
from ._journal import LEASE, LIVE_LOCK_CLASS, JournalArchive

__all__ = ["FENCE_WAIT", "LOCK_WAIT", "FileLiveness", "Liveness", "SessionLiveness"]

logger = logging.getLogger("aun_runtime.distributed")

#: Seconds an instance that ended another's session (its lease ran out) waits for the lock to come free.
FENCE_WAIT = 2.0

#: Seconds an instance waits for its own lock file at start (another instance may hold it for a
#: moment while it checks whether this one is dead); past it, another process runs this instance.
LOCK_WAIT = 10.0


class Liveness(Protocol):
    """How a ledger tells a dead instance from a live one, and what a dead one handled."""

    def join(self, db: Storage) -> None:
        """Inside the ledger's first transaction: record what the other instances need to judge this one."""
        ...

    def if_dead(self, db: Storage, instance: str) -> contextlib.AbstractContextManager[bool]:
        """True while held (and `instance` kept from starting meanwhile) if it is not running."""
        ...

    def handled_by(self, db: Storage, instance: str, aid: str, origin: str, seq: int) -> bool:
        """Whether the dead `instance` committed the handling of `(origin, seq)` of `aid`."""
        ...

    def check_alive(self, db: Storage) -> None:
        """Inside a ledger transaction: raise `FencedError` if this instance lost its proof of life."""
        ...

    def close(self) -> None:
        """Let go of this instance's proof of life (if it is this object's to hold)."""
        ...


class FileLiveness:
    """`flock`s on lock files beside an SQLite ledger file: instances on one machine.

    Raises:
        AgentRegistrationError: another process runs this instance (its lock stays taken).
    """

    def __init__(self, ledger: Path, instance: str, aid: str, journal: str | Path) -> None:
        self._ledger = ledger
        self._instance = instance
        self._journal = str(Path(journal).resolve())
        self._lock: IO[str] | None = open(self._lock_path(instance), "a+")  # noqa: SIM115 - held until close
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._lock.close()
                    raise AgentRegistrationError(
                        f"service {aid}: instance {instance} already runs in another process"
                        f" (it holds {self._lock_path(instance)})"
                    ) from None
                time.sleep(0.05)

    def _lock_path(self, instance: str) -> str:
        return f"{self._ledger}.{instance}.lock"

    def join(self, db: Storage) -> None:
        db.execute(
            "INSERT INTO svc_instances (instance, journal) VALUES (?, ?)"
            " ON CONFLICT (instance) DO UPDATE SET journal = excluded.journal",
            (self._instance, self._journal),
        )

    @contextlib.contextmanager
    def if_dead(self, db: Storage, instance: str) -> Iterator[bool]:
        try:
            lock = open(self._lock_path(instance), "a+")  # noqa: SIM115 - closed below
        except OSError:
            yield True
            return
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            lock.close()  # closing lets go of the lock

    def handled_by(self, db: Storage, instance: str, aid: str, origin: str, seq: int) -> bool:
        rows = db.fetch("SELECT journal FROM svc_instances WHERE instance = ?", (instance,))
        if not rows or not os.path.exists(rows[0][0]):
            return False
        journal = open_storage(rows[0][0])
        try:
            found = journal.fetch(
                "SELECT 1 FROM aun_in_handled WHERE origin = ? AND aid = ? AND seq = ?", (origin, aid, seq)
            )
        except Exception as exc:
            if journal.dialect.is_missing_table(exc):
                return False  # it never handled a service delivery
            raise
        finally:
            journal.close()
        return bool(found)

    def check_alive(self, db: Storage) -> None:
        return  # the lock is a file this process holds until it ends

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


class SessionLiveness:
    """Locks held by the instances' journal sessions in a shared database: instances on any machines."""

    def __init__(self, journal: JournalArchive) -> None:
        self._journal = journal

    def join(self, db: Storage) -> None:
        return  # the journal registered the worker and holds its lock

    @contextlib.contextmanager
    def if_dead(self, db: Storage, instance: str) -> Iterator[bool]:
        rows = db.fetch("SELECT lock FROM aun_workers WHERE worker = ?", (instance,))
        if not rows:
            yield True  # never started with this database: nothing of it can commit
            return
        key = (LIVE_LOCK_CLASS, int(rows[0][0]))
        if not db.dialect.try_lock(db, key) and not self._fence(db, instance, key):
            yield False
            return
        try:
            yield True
        finally:
            db.dialect.unlock(db, key)

    def _fence(self, db: Storage, instance: str, key: tuple[int, int]) -> bool:
        """`instance`'s session holds its lock: if its lease has run out, end that session and take
        the lock (True). Its process may still run (frozen, its event loop blocked): whatever it
        does next fails with its session, and it rejoins."""
        if not db.dialect.lease_expired(db, instance):
            return False  # renewed in time (or never leased: a worker without leases is not judged by one)
        refused = db.dialect.end_lock_holders(db, key)
        if refused is not None:  # not allowed to end it (another role): it keeps its claims
            logger.warning("instance %s: its lease ran out, but its session cannot be ended: %s", instance, refused)
            return False
        deadline = time.monotonic() + FENCE_WAIT
        while time.monotonic() < deadline:  # the session's end lets go of the lock a moment later
            if db.dialect.try_lock(db, key):
                logger.warning("instance %s renewed no lease for %g s: its session is ended and it is fenced", instance, LEASE)
                return True
            time.sleep(0.01)
        return False

    def handled_by(self, db: Storage, instance: str, aid: str, origin: str, seq: int) -> bool:
        scope = db.dialect.scoped("worker", instance)
        return bool(
            db.fetch(
                scope.sql("SELECT 1 FROM aun_in_handled WHERE {where}origin = ? AND aid = ? AND seq = ?"),
                (*scope.args, origin, aid, seq),
            )
        )

    def check_alive(self, db: Storage) -> None:
        self._journal.check_alive(db)

    def close(self) -> None:
        return  # the lock is the journal's: it goes when the journal's session ends
