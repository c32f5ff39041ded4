"""Proof that a service AID's instance is dead, and what it handled: on one machine, or across several.

The ledger (`._service_store`) passes a delivery claimed by another instance to the one that asks
only when that instance is *proven* dead, and settles the claim from what the dead instance
committed. Two proofs, one interface:

* `FileLiveness` (instances on one machine, an SQLite ledger file): each instance holds an
  exclusive `flock` on its own lock file beside the ledger; the kernel lets go of it when the
  process ends, SIGKILL included. What a dead instance handled is read from its journal file, whose
  path the ledger records.
* `PostgresLiveness` (instances on any machines, the ledger in the PostgreSQL database of their
  journals): each worker's journal session holds the worker's advisory lock (see `._journal`);
  the server lets go of it when the session ends: when the process dies, or within
  `SESSION_TIMEOUT` seconds (`aun_runtime._postgres_storage`) once the server finds it cut off. What a dead instance handled is
  read from its journal rows in the same database.

In both, whoever took a dead instance's lock holds it while it settles that instance's claim, so
the instance cannot start again (and settle the same claim) meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol

from .._errors import AgentRegistrationError
from .._storage import SQLITE_BUSY_TIMEOUT, Storage
from ._journal import LIVE_LOCK_CLASS, JournalArchive

__all__ = ["LOCK_WAIT", "FileLiveness", "Liveness", "PostgresLiveness"]

#: Seconds an instance waits for its own lock file at start (another instance may hold it for a
#: moment while it checks whether this one is dead); past it, another process runs this instance.
LOCK_WAIT = 10.0


class Liveness(Protocol):
    """How a ledger tells a dead instance from a live one, and what a dead one handled."""

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

    def __init__(self, ledger: Path, instance: str, aid: str) -> None:
        self._ledger = ledger
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
        journal = sqlite3.connect(rows[0][0], timeout=SQLITE_BUSY_TIMEOUT)
        try:
            found = journal.execute(
                "SELECT 1 FROM aun_in_handled WHERE origin = ? AND aid = ? AND seq = ?", (origin, aid, seq)
            ).fetchone()
        except sqlite3.OperationalError:
            return False  # no such table: it never handled a service delivery
        finally:
            journal.close()
        return found is not None

    def check_alive(self, db: Storage) -> None:
        return  # the lock is a file this process holds until it ends

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


class PostgresLiveness:
    """Advisory locks held by the instances' journal sessions: instances on any machines."""

    def __init__(self, journal: JournalArchive) -> None:
        self._journal = journal

    @contextlib.contextmanager
    def if_dead(self, db: Storage, instance: str) -> Iterator[bool]:
        rows = db.fetch("SELECT lock FROM aun_workers WHERE worker = ?", (instance,))
        if not rows:
            yield True  # never started with this database: nothing of it can commit
            return
        key = (LIVE_LOCK_CLASS, int(rows[0][0]))
        if not db.fetch("SELECT pg_try_advisory_lock(?, ?)", key)[0][0]:
            yield False
            return
        try:
            yield True
        finally:
            db.fetch("SELECT pg_advisory_unlock(?, ?)", key)

    def handled_by(self, db: Storage, instance: str, aid: str, origin: str, seq: int) -> bool:
        return bool(
            db.fetch(
                "SELECT 1 FROM aun_in_handled WHERE worker = ? AND origin = ? AND aid = ? AND seq = ?",
                (instance, origin, aid, seq),
            )
        )

    def check_alive(self, db: Storage) -> None:
        self._journal.check_alive(db)

    def close(self) -> None:
        return  # the lock is the journal's: it goes when the journal's session ends

