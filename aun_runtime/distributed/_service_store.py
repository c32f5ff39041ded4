"""The ledger a service AID's instances share: who claimed which delivery, and how far it is handled.

A service AID is held by several workers at once (its *instances*, see `._servicer`). A
sender's stream to it is numbered as for any AID, but its messages may reach different instances,
and an instance may die with messages it had taken. So the instances on one machine share one
SQLite file per service AID (WAL mode), the ledger:

* **claims.** Before an instance hands a delivery to its agent, it claims `(sending worker, seq)`
  in the ledger. A delivery claimed by a live instance is left to it; one claimed by an instance
  that is dead is resolved from that instance's own journal (it records every service delivery it
  handled in the same transaction as what the handling caused): handled there, it counts as done;
  not handled, the claim passes to the instance that asks;
* **done.** Once an instance's journal has committed a handling, its claim is marked done, and the
  stream's *handled-through* position (the highest number below which everything is done) moves;
  an instance acknowledges that position to the sender, whichever instance handled the rest.

"Dead" is proven, not guessed: each instance holds an exclusive `flock` on its own lock file
beside the ledger for as long as it runs, and the kernel lets go of it when the process ends (a
SIGKILL included). An instance whose lock can be taken is dead, and cannot come back while the
taker holds it. A host that merely lost sight of an instance is not enough to take its work.

Beside the ledger is the service's secret (`<ledger>.secret`, mode 0600, made by the first
instance): every instance presents it when it registers the AID, and the host admits as instances
only the processes that present the same one, that is, those that can read the ledger's directory.

Tables:

```text
svc_claims(origin TEXT, seq INTEGER, instance TEXT, done INTEGER, at INTEGER)  -- per delivery
svc_streams(origin TEXT PRIMARY KEY, through INTEGER)   -- handled through, per sending worker
svc_instances(instance TEXT PRIMARY KEY, journal TEXT)  -- where each instance's journal is
```
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from .._errors import AgentRegistrationError
from ._identity import worker_secret

__all__ = ["LEDGER_KEEP", "POLICIES", "ROUND_ROBIN", "SENDER_AFFINITY", "Claim", "ServiceLedger", "ledger_path"]

logger = logging.getLogger("aun_runtime.distributed")

#: Any instance may take any message; a sender's messages are spread over the live instances.
ROUND_ROBIN = "round_robin"
#: Each sender's stream goes to one instance while that instance lives, so per-sender order holds.
SENDER_AFFINITY = "sender_affinity"
POLICIES = (ROUND_ROBIN, SENDER_AFFINITY)
#: Done claims kept per sending worker below its handled-through position (older ones are pruned:
#: the position alone says they were handled). Bounds the ledger.
LEDGER_KEEP = 10_000
#: Seconds a ledger transaction waits for another instance's.
BUSY_TIMEOUT = 30.0
#: Seconds an instance waits for its own lock at start (another instance may hold it for a moment
#: while it checks whether this one is dead); past it, another process runs this instance.
LOCK_WAIT = 10.0

_TABLES = """
CREATE TABLE IF NOT EXISTS svc_claims (origin TEXT NOT NULL, seq INTEGER NOT NULL, instance TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0, at INTEGER NOT NULL, PRIMARY KEY (origin, seq));
CREATE TABLE IF NOT EXISTS svc_streams (origin TEXT PRIMARY KEY, through INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS svc_instances (instance TEXT PRIMARY KEY, journal TEXT NOT NULL);
"""


class Claim(enum.Enum):
    """What asking for a delivery gave."""

    WON = "won"  #: this instance handles it now
    DONE = "done"  #: handled already (by any instance): acknowledge, do not handle
    ELSEWHERE = "elsewhere"  #: a live instance has it: leave it alone


def ledger_path(directory: str | Path, aid: str) -> Path:
    """The ledger file of `aid` in `directory` (AIDs are file-name safe: letters, digits, '.', '-')."""
    return Path(directory) / f"{aid}.service.sqlite"


def _now_ms() -> int:
    return int(time.time() * 1000)


class ServiceLedger:
    """One instance's handle on the ledger of one service AID.

    Opening it takes this instance's lock (waiting while another instance checks whether this one
    is dead), records where this instance's journal is, and settles what a previous run of this
    instance left: its claims that its journal shows handled are done, the others are released.

    Raises:
        AgentRegistrationError: another process runs this instance (its lock stays taken).

    Args:
        path: the ledger file.
        instance: this worker's name.
        journal: this worker's archive file.
        handled: whether this worker's journal has handled `(origin, seq)` of this AID.
        aid: the service AID (for the log).
    """

    def __init__(
        self, path: str | Path, *, instance: str, journal: str, handled: Callable[[str, int], bool], aid: str
    ) -> None:
        self.path = Path(path)
        self.aid = aid
        self.instance = instance
        self.path.parent.mkdir(parents=True, exist_ok=True)
        #: What proves to the host that an instance shares this ledger (``<ledger>.secret``, 0600).
        self.secret = worker_secret(self.path)
        self._lock: IO[str] | None = self._take_lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_TABLES)
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO svc_instances (instance, journal) VALUES (?, ?)", (instance, str(Path(journal).resolve())))
        self.settle(handled)

    def _take_lock(self) -> IO[str]:
        """This instance's lock; another instance checking whether this one is dead holds it for a moment."""
        lock = open(self._lock_path(self.instance), "a+")  # noqa: SIM115 - held until close
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return lock
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock.close()
                    raise AgentRegistrationError(
                        f"service {self.aid}: instance {self.instance} already runs in another process"
                        f" (it holds {self._lock_path(self.instance)})"
                    ) from None
                time.sleep(0.05)

    def _lock_path(self, instance: str) -> str:
        return f"{self.path}.{instance}.lock"

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")  # one writer at a time across the instances
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def settle(self, handled: Callable[[str, int], bool]) -> None:
        """This instance has nothing in flight (starting, or stopped): settle its open claims."""
        with self._transaction() as db:
            rows = db.execute("SELECT origin, seq FROM svc_claims WHERE instance = ? AND done = 0", (self.instance,)).fetchall()
            origins = set()
            for origin, seq in rows:
                if handled(origin, seq):
                    db.execute("UPDATE svc_claims SET done = 1 WHERE origin = ? AND seq = ?", (origin, seq))
                    origins.add(origin)
                else:
                    db.execute("DELETE FROM svc_claims WHERE origin = ? AND seq = ?", (origin, seq))
            for origin in origins:
                self._advance(db, origin)
        if rows:
            logger.info("service %s: instance %s settled %d open claims of its last run", self.aid, self.instance, len(rows))

    def through(self, origin: str) -> int:
        row = self._db.execute("SELECT through FROM svc_streams WHERE origin = ?", (origin,)).fetchone()
        return int(row[0]) if row is not None else 0

    def claim(self, origin: str, items: Sequence[tuple[int, int]], *, in_order: bool) -> tuple[list[Claim], int]:
        """Claim deliveries `(seq, base)` of one sender's stream; their verdicts and its position.

        `base` is the sender's lowest unacknowledged number: everything below it was handled. With
        `in_order`, nothing after a delivery left `ELSEWHERE` is claimed (it is `ELSEWHERE`
        too), so that a stream is handled in order.
        """
        verdicts: list[Claim] = []
        with self._transaction() as db:
            through = self._raise_to_base(db, origin, max((base for _, base in items), default=0))
            blocked = False
            for seq, _ in items:
                if seq <= through:
                    verdicts.append(Claim.DONE)
                elif blocked:
                    verdicts.append(Claim.ELSEWHERE)
                else:
                    verdict = self._claim_one(db, origin, seq)
                    blocked = in_order and verdict is Claim.ELSEWHERE
                    verdicts.append(verdict)
            if any(v is Claim.DONE for v in verdicts):
                through = self._advance(db, origin)
        return verdicts, through

    def _raise_to_base(self, db: sqlite3.Connection, origin: str, base: int) -> int:
        row = db.execute("SELECT through FROM svc_streams WHERE origin = ?", (origin,)).fetchone()
        through = int(row[0]) if row is not None else 0
        if base - 1 > through:
            through = base - 1
            db.execute("INSERT OR REPLACE INTO svc_streams (origin, through) VALUES (?, ?)", (origin, through))
        return through

    def _claim_one(self, db: sqlite3.Connection, origin: str, seq: int) -> Claim:
        row = db.execute("SELECT instance, done FROM svc_claims WHERE origin = ? AND seq = ?", (origin, seq)).fetchone()
        if row is None:
            db.execute("INSERT INTO svc_claims (origin, seq, instance, done, at) VALUES (?, ?, ?, 0, ?)", (origin, seq, self.instance, _now_ms()))
            return Claim.WON
        holder, done = str(row[0]), bool(row[1])
        if done:
            return Claim.DONE
        if holder == self.instance:
            return Claim.WON  # asked again (a resend) while this instance has not taken it up yet
        with self._if_dead(holder) as dead:
            if not dead:
                return Claim.ELSEWHERE
            if self._handled_by(db, holder, origin, seq):
                db.execute("UPDATE svc_claims SET done = 1 WHERE origin = ? AND seq = ?", (origin, seq))
                return Claim.DONE
            db.execute("UPDATE svc_claims SET instance = ?, at = ? WHERE origin = ? AND seq = ?", (self.instance, _now_ms(), origin, seq))
            logger.info("service %s: %s takes delivery %s:%d from the dead instance %s", self.aid, self.instance, origin, seq, holder)
            return Claim.WON

    @contextlib.contextmanager
    def _if_dead(self, instance: str) -> Iterator[bool]:
        """True (and the instance kept from starting again meanwhile) if `instance` is not running."""
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

    def _handled_by(self, db: sqlite3.Connection, instance: str, origin: str, seq: int) -> bool:
        """Whether a dead instance's journal committed the handling of `(origin, seq)`."""
        row = db.execute("SELECT journal FROM svc_instances WHERE instance = ?", (instance,)).fetchone()
        if row is None or not os.path.exists(row[0]):
            return False
        journal = sqlite3.connect(row[0], timeout=BUSY_TIMEOUT)
        try:
            found = journal.execute(
                "SELECT 1 FROM aun_in_handled WHERE origin = ? AND aid = ? AND seq = ?", (origin, self.aid, seq)
            ).fetchone()
        except sqlite3.OperationalError:
            return False  # no such table: it never handled a service delivery
        finally:
            journal.close()
        return found is not None

    def done(self, items: Sequence[tuple[str, int]]) -> dict[str, int]:
        """This instance's journal committed these handlings: mark them; the new positions per sender."""
        with self._transaction() as db:
            origins: set[str] = set()
            for origin, seq in items:
                db.execute(
                    "INSERT INTO svc_claims (origin, seq, instance, done, at) VALUES (?, ?, ?, 1, ?)"
                    " ON CONFLICT (origin, seq) DO UPDATE SET done = 1",
                    (origin, seq, self.instance, _now_ms()),
                )
                origins.add(origin)
            return {origin: self._advance(db, origin) for origin in origins}

    def _advance(self, db: sqlite3.Connection, origin: str) -> int:
        row = db.execute("SELECT through FROM svc_streams WHERE origin = ?", (origin,)).fetchone()
        through = int(row[0]) if row is not None else 0
        start = through
        for (seq,) in db.execute(
            "SELECT seq FROM svc_claims WHERE origin = ? AND seq > ? AND done = 1 ORDER BY seq", (origin, through)
        ):
            if seq != through + 1:
                break
            through = seq
        if through != start or row is None:
            db.execute("INSERT OR REPLACE INTO svc_streams (origin, through) VALUES (?, ?)", (origin, through))
            db.execute("DELETE FROM svc_claims WHERE origin = ? AND seq <= ? AND done = 1", (origin, through - LEDGER_KEEP))
        return through

    def close(self, handled: Callable[[str, int], bool] | None = None) -> None:
        """Settle this instance's open claims (if told how) and let go of its lock."""
        if self._lock is None:
            return
        try:
            if handled is not None:
                self.settle(handled)
        finally:
            self._db.close()
            self._lock.close()
            self._lock = None
