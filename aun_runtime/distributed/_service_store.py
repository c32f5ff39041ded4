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

**Across machines** the ledger is in the PostgreSQL database that holds the instances' journals
(`SessionLiveness`): the same tables with an `aid` column first (one database, every service
AID), and `svc_secrets(aid, secret)`. Proof of death is then a worker's session-level advisory
lock (held by its journal's session, see `._journal`): an instance whose lock can be taken has no
session any more, so none of its commits can still come, and its claims are settled from its
journal rows in the same database, never from a file on its machine. The ledger uses the journal's
own session, so that a claim, the handling's commit and the lock are one session's: once the
server has ended it, the instance can commit nothing more, and `FencedError` says so where a
transaction finds the lock gone.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from protocols.aun import QUEUE_ROUTINGS

from ..storage import Storage, dialect_for, open_storage
from ..storage._archive import create_tables
from ._identity import worker_secret
from ._journal import JournalArchive
from ._service_liveness import FileLiveness, Liveness, SessionLiveness

__all__ = [
    "LEDGER_KEEP",
    "POLICIES",
    "Claim",
    "ServiceLedger",
    "ledger_path",
    "open_ledger",
]

logger = logging.getLogger("aun_runtime.distributed")

#: A service AID's policies are the AUN queue routings (`protocols.aun`): `round_robin`, any
#: instance may take any message; `sender_affinity`, each sender's stream goes to one instance
#: while that instance lives, so per-sender order holds.
POLICIES = QUEUE_ROUTINGS
#: Done claims kept per sending worker below its handled-through position (older ones are pruned:
#: the position alone says they were handled). Bounds the ledger.
LEDGER_KEEP = 10_000


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

    Opening it records where this instance's journal is (SQLite) and settles what a previous run
    of this instance left: its claims that its journal shows handled are done, the others are
    released. Made by [`open_ledger`][aun_runtime.distributed._service_store.open_ledger].

    Args:
        storage: the ledger's database (on PostgreSQL: the journal's own session).
        liveness: how a dead instance is told from a live one.
        instance: this worker's name.
        journal: this worker's journal.
        aid: the service AID.
        secret: what every instance presents to the host to hold the AID.
        owns_storage: the ledger closes `storage` when it closes (a file of its own, not the
            journal's session).
    """

    def __init__(
        self,
        storage: Storage,
        liveness: Liveness,
        *,
        instance: str,
        journal: JournalArchive,
        aid: str,
        secret: str,
        owns_storage: bool,
    ) -> None:
        self.aid = aid
        self.instance = instance
        #: What proves to the host that an instance shares this ledger.
        self.secret = secret
        self._db = storage
        self._liveness = liveness
        self._journal = journal
        self._owns_storage = owns_storage
        self._scope = storage.dialect.scoped("aid", aid)
        self._open = True
        with self._transaction() as db:
            liveness.join(db)
        self.settle(self._handled_here)

    def _handled_here(self, origin: str, seq: int) -> bool:
        return self._journal.service_handled(origin, self.aid, seq)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Storage]:
        """One writer at a time across the instances; the fence checked inside."""
        with self._db.transaction():
            self._liveness.check_alive(self._db)
            yield self._db

    def _sql(self, template: str) -> str:
        return self._scope.sql(template)

    def settle(self, handled: Callable[[str, int], bool] | None = None) -> None:
        """This instance has nothing in flight (starting, or stopped): settle its open claims."""
        handled = handled or self._handled_here
        scope = self._scope
        with self._transaction() as db:
            rows = db.fetch(
                self._sql("SELECT origin, seq FROM svc_claims WHERE {where}instance = ? AND done = 0"),
                (*scope.args, self.instance),
            )
            origins = set()
            for origin, seq in rows:
                if handled(origin, seq):
                    self._mark_done(db, origin, seq)
                    origins.add(origin)
                else:
                    db.execute(self._sql("DELETE FROM svc_claims WHERE {where}origin = ? AND seq = ?"), (*scope.args, origin, seq))
            for origin in origins:
                self._advance(db, origin)
        if rows:
            logger.info("service %s: instance %s settled %d open claims of its last run", self.aid, self.instance, len(rows))

    def _mark_done(self, db: Storage, origin: str, seq: int) -> None:
        db.execute(self._sql("UPDATE svc_claims SET done = 1 WHERE {where}origin = ? AND seq = ?"), (*self._scope.args, origin, seq))

    def _stream_through(self, db: Storage, origin: str) -> int | None:
        rows = db.fetch(self._sql("SELECT through FROM svc_streams WHERE {where}origin = ?"), (*self._scope.args, origin))
        return int(rows[0][0]) if rows else None

    def _set_through(self, db: Storage, origin: str, through: int) -> None:
        db.execute(
            self._sql(
                "INSERT INTO svc_streams ({cols}origin, through) VALUES ({vals}?, ?)"
                " ON CONFLICT ({cols}origin) DO UPDATE SET through = excluded.through"
            ),
            (*self._scope.args, origin, through),
        )

    def through(self, origin: str) -> int:
        return self._stream_through(self._db, origin) or 0

    def claim(self, origin: str, items: Sequence[tuple[int, int]], *, in_order: bool) -> tuple[list[Claim], int]:
        """Claim deliveries `(seq, base)` of one sender's stream; their verdicts and its position.

        `base` is the sender's lowest unacknowledged number: everything below it was handled. With
        `in_order`, nothing after a delivery left `ELSEWHERE` is claimed (it is `ELSEWHERE`
        too), so that a stream is handled in order.

        Raises:
            FencedError: this instance lost its proof of life; nothing is claimed.
            StorageSessionLostError: the ledger's database session has ended.
        """
        verdicts: list[Claim] = []
        with self._transaction() as db:
            through = self._raise_to_base(db, origin, max((base for _, base in items), default=0))
            known = self._known_claims(db, origin, [seq for seq, _ in items if seq > through])
            new: list[int] = []
            alive: set[str] = set()  # holders found running in this transaction
            blocked = False
            for seq, _ in items:
                if seq <= through:
                    verdicts.append(Claim.DONE)
                elif blocked:
                    verdicts.append(Claim.ELSEWHERE)
                else:
                    verdict = self._verdict(db, origin, seq, known, new, alive)
                    blocked = in_order and verdict is Claim.ELSEWHERE
                    verdicts.append(verdict)
            if new:  # every new claim of the burst in one statement (one round trip on PostgreSQL)
                now = _now_ms()
                db.executemany(
                    self._sql("INSERT INTO svc_claims ({cols}origin, seq, instance, done, at) VALUES ({vals}?, ?, ?, 0, ?)"),
                    self._scope.rows([(origin, seq, self.instance, now) for seq in new]),
                )
            if any(v is Claim.DONE for v in verdicts):
                through = self._advance(db, origin)
        return verdicts, through

    def _known_claims(self, db: Storage, origin: str, seqs: list[int]) -> dict[int, tuple[str, bool]]:
        """The claims already made on `seqs` (one range query for a burst)."""
        if not seqs:
            return {}
        rows = db.fetch(
            self._sql("SELECT seq, instance, done FROM svc_claims WHERE {where}origin = ? AND seq BETWEEN ? AND ?"),
            (*self._scope.args, origin, min(seqs), max(seqs)),
        )
        return {int(seq): (str(holder), bool(done)) for seq, holder, done in rows}

    def _verdict(
        self, db: Storage, origin: str, seq: int, known: dict[int, tuple[str, bool]], new: list[int], alive: set[str]
    ) -> Claim:
        claim = known.get(seq)
        if claim is None:
            known[seq] = (self.instance, False)
            new.append(seq)
            return Claim.WON
        holder, done = claim
        if done:
            return Claim.DONE
        if holder == self.instance:
            return Claim.WON  # asked again (a resend) while this instance has not taken it up yet
        if holder in alive:
            return Claim.ELSEWHERE
        verdict = self._from_other(db, origin, seq, holder)
        if verdict is Claim.ELSEWHERE:
            alive.add(holder)
        else:
            known[seq] = (self.instance, verdict is Claim.DONE)
        return verdict

    def _raise_to_base(self, db: Storage, origin: str, base: int) -> int:
        through = self._stream_through(db, origin) or 0
        if base - 1 > through:
            through = base - 1
            self._set_through(db, origin, through)
        return through

    def _from_other(self, db: Storage, origin: str, seq: int, holder: str) -> Claim:
        """A delivery another instance claimed: left to it while it lives, else settled from its journal."""
        args = self._scope.args
        with self._liveness.if_dead(db, holder) as dead:
            if not dead:
                return Claim.ELSEWHERE
            if self._liveness.handled_by(db, holder, self.aid, origin, seq):
                self._mark_done(db, origin, seq)
                return Claim.DONE
            db.execute(
                self._sql("UPDATE svc_claims SET instance = ?, at = ? WHERE {where}origin = ? AND seq = ?"),
                (self.instance, _now_ms(), *args, origin, seq),
            )
            logger.info("service %s: %s takes delivery %s:%d from the dead instance %s", self.aid, self.instance, origin, seq, holder)
            return Claim.WON

    def done(self, items: Sequence[tuple[str, int]]) -> dict[str, int]:
        """This instance's journal committed these handlings: mark them; the new positions per sender."""
        with self._transaction() as db:
            now = _now_ms()
            db.executemany(
                self._sql(
                    "INSERT INTO svc_claims ({cols}origin, seq, instance, done, at) VALUES ({vals}?, ?, ?, 1, ?)"
                    " ON CONFLICT ({cols}origin, seq) DO UPDATE SET done = 1"
                ),
                self._scope.rows([(origin, seq, self.instance, now) for origin, seq in items]),
            )
            origins = {origin for origin, _ in items}
            return {origin: self._advance(db, origin) for origin in origins}

    def _advance(self, db: Storage, origin: str) -> int:
        args = self._scope.args
        known = self._stream_through(db, origin)
        through = start = known or 0
        for (seq,) in db.fetch(
            self._sql("SELECT seq FROM svc_claims WHERE {where}origin = ? AND seq > ? AND done = 1 ORDER BY seq"),
            (*args, origin, through),
        ):
            if seq != through + 1:
                break
            through = int(seq)
        if through != start or known is None:
            self._set_through(db, origin, through)
            db.execute(
                self._sql("DELETE FROM svc_claims WHERE {where}origin = ? AND seq <= ? AND done = 1"),
                (*args, origin, through - LEDGER_KEEP),
            )
        return through

    def close(self, handled: Callable[[str, int], bool] | None = None) -> None:
        """Settle this instance's open claims (if told how) and let go of its lock."""
        if not self._open:
            return
        self._open = False
        try:
            if handled is not None:
                self.settle(handled)
        finally:
            if self._owns_storage:
                self._db.close()
            self._liveness.close()


def open_ledger(location: str | Path | None, *, aid: str, instance: str, journal: JournalArchive) -> ServiceLedger:
    """The ledger of service `aid` for the worker whose journal is `journal`.

    Args:
        location: where the ledgers are. For a journal in SQLite: a directory of SQLite ledger files
            shared by the instances on this machine (default: the journal's directory). For a
            journal in PostgreSQL: None or the journal's own `postgresql://` URL (the ledger must be
            in the database of the journals, so that a handling, its claim and the lock that fences
            them are one session's).

        aid: the service AID.
        instance: this worker's name.
        journal: this worker's journal.

    Raises:
        ValueError: a PostgreSQL ledger for a journal that is not in that database.
        AgentRegistrationError: another process runs this instance.
    """
    storage = journal.storage
    if storage.dialect.shared:
        if location is not None and str(location) != journal.path:
            raise ValueError(
                f"service {aid}: the service ledger must be in the database of the worker's archive:"
                " a handling and its claim are committed on one session"
            )
        create_tables(storage, storage.dialect.service_ledger_tables, storage.dialect.service_ledger_tables)
        storage.execute(
            "INSERT INTO svc_secrets (aid, secret) VALUES (?, ?) ON CONFLICT (aid) DO NOTHING",
            (aid, secrets.token_hex(32)),
        )
        secret = str(storage.fetch("SELECT secret FROM svc_secrets WHERE aid = ?", (aid,))[0][0])
        return ServiceLedger(
            storage, SessionLiveness(journal), instance=instance, journal=journal, aid=aid, secret=secret,
            owns_storage=False,
        )
    if dialect_for(str(location or "")).shared:
        raise ValueError(
            f"service {aid}: a PostgreSQL service ledger needs the worker's archive in the same database"
            " (--archive postgresql://...): the ledger settles a dead instance's claims from its journal there"
        )
    directory = Path(location) if location is not None else Path(journal.path).parent
    path = ledger_path(directory, aid)
    path.parent.mkdir(parents=True, exist_ok=True)
    liveness = FileLiveness(path, instance, aid, journal.path)
    try:
        ledger_storage = open_storage(path)
        ledger_storage.script(ledger_storage.dialect.service_ledger_tables)
    except BaseException:
        liveness.close()
        raise
    return ServiceLedger(
        ledger_storage, liveness, instance=instance, journal=journal, aid=aid, secret=worker_secret(path),
        owns_storage=True,
    )
