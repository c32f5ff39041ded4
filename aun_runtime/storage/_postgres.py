"""[`Storage`][aun_runtime.Storage] on a PostgreSQL server, through asyncpg on a thread of its own, and the
PostgreSQL `Dialect`: the store several machines share.

asyncpg was chosen by `bench/postgres_driver.py` (docs/performance.md). It is asynchronous, and the
runtime's storage interface is synchronous, as SQLite's is: the archive writes from its writer
thread, and a worker's journal commits on the event loop and must know, before it sends anything,
that the commit happened. So each `PostgresStorage` runs one asyncpg connection on an event loop
in a thread of its own, and every call waits for its statement there. The loop the agents run on
never runs asyncpg's code, and the same interface serves a writer thread and the loop alike; what a
call costs is measured by `bench/postgres_archive.py` against the SQLite path (docs/performance.md).

**A session is proof of life.** The connection is never reconnected behind its user's back. A
session-level advisory lock taken on it (a worker's journal takes one, see
`aun_runtime.distributed._journal`) is held exactly as long as the session lives, and the server
ends the session of a peer that went away: at once when its process dies (its kernel closes the
socket), and within `SESSION_TIMEOUT` seconds when it is cut off, through the TCP keepalive and
user-timeout settings each session sets on its own server-side socket (no server configuration
needed). Once the session is gone, every later call raises
[`StorageSessionLostError`][aun_runtime.StorageSessionLostError] and `on_lost` is called once.

**A commit is on the server's disk when it returns**, whatever the server's settings. What follows a
commit (an acknowledgement, a reply, a claim's handling) tells others that it is kept; a commit the
server acknowledges before its write-ahead log is flushed (`synchronous_commit = off`, a common
tuning, set for the server, a database or a role) is lost if the server crashes within the next
fraction of a second, and with it, exactly once. So a session that finds `synchronous_commit` off
sets it `on` for itself, which any role may do; the other values (`local`, `remote_write`, `on`,
`remote_apply`) all flush locally first, and are kept as the server's owner chose them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..base._errors import StorageSessionLostError, StorageUnavailableError
from ._postgres_refusal import refusal
from ._protocol import Dialect, LockKey, Row, Storage, StorageKind
from ._scoped_sql import ScopedSQL

__all__ = [
    "CONNECT_TIMEOUT",
    "POSTGRESQL",
    "SESSION_TIMEOUT",
    "STATEMENT_WAIT",
    "PostgresDialect",
    "PostgresStorage",
    "redacted_url",
]

logger = logging.getLogger("aun_runtime")

T = TypeVar("T")

#: Seconds to wait for the server when connecting. A server on the network answers in milliseconds;
#: past this the address is wrong or the server is down, and opening fails with a clear error.
CONNECT_TIMEOUT = 10.0
#: Seconds after which the server gives up on a peer it cannot reach: TCP keepalive probes start
#: after 2 idle seconds, one a second, and 3 unanswered ones end the session (2 + 3 = 5); a session
#: with data unacknowledged for 5 s ends the same way (`tcp_user_timeout`). Short, so that a dead or
#: cut-off instance's work passes to the others within seconds; long enough that a busy network's
#: hiccup (well under a second) never ends a healthy session.
SESSION_TIMEOUT = 5.0
_SESSION_SETTINGS = {
    "tcp_keepalives_idle": "2",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": str(int(SESSION_TIMEOUT * 1000)),
    "application_name": "aun-runtime",
}
#: Seconds a call waits for its statement's answer. Far over any statement the runtime makes (a
#: writer's transaction of 16 batches of 512 records takes tens of milliseconds); a call that waits
#: longer is talking to a server it is cut off from, and its session is treated as lost, since the
#: server will have ended it (`SESSION_TIMEOUT`) by then.
STATEMENT_WAIT = 15.0

#: Seconds between two looks at a watched session (`watch`) while nobody uses it: an idle worker
#: cut off from the server learns within this plus `SESSION_TIMEOUT` that its session is gone.
WATCH_INTERVAL = 1.0

_PLACEHOLDER = re.compile(r"\?")


@functools.lru_cache(maxsize=512)
def _numbered(sql: str) -> str:
    """`?` placeholders as PostgreSQL's `$1, $2, ...` (the runtime's SQL has no `?` in literals)."""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


async def _commit_durably(connection: Any) -> None:
    """Make the session's commits wait for the server's disk (see the module's docstring)."""
    if await connection.fetchval("SELECT current_setting('synchronous_commit')") == "off":
        await connection.execute("SET synchronous_commit = on")


def redacted_url(url: str) -> str:
    """`url` with its password (if any) shown as `***`: for logs and pages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

# -- the archive's tables and batch insert, as PostgreSQL spells them (see aun_runtime.storage._archive_sql) -

# The same tables as in SQLite, shared by the workers of several machines. Message rows are numbered
# by the archives themselves, as in SQLite, from blocks of `MESSAGE_ROW_BLOCK` numbers each archive
# takes from a sequence, so that two workers never give two messages one number.
_ARCHIVE_TABLES = """
CREATE TABLE IF NOT EXISTS messages (
    id BIGINT PRIMARY KEY,
    message_id TEXT NOT NULL,
    from_aid TEXT NOT NULL,
    to_aid TEXT,
    group_id TEXT,
    thread TEXT,
    in_reply_to TEXT,
    created_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS message_row_blocks INCREMENT BY 4096;
CREATE TABLE IF NOT EXISTS records (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT,
    message BIGINT,
    text TEXT,
    recorded_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_owner ON records(owner, id);
CREATE OR REPLACE VIEW archive AS
{view}CREATE TABLE IF NOT EXISTS agents (
    aid TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    mode TEXT NOT NULL,
    description TEXT NOT NULL,
    card TEXT,
    registered_at BIGINT NOT NULL
);
"""
#: Message row numbers an archive on PostgreSQL takes at a time (the sequence's increment): one
#: round trip to the server per 4,096 messages; numbers of a block left unused when a worker stops
#: are merely skipped.
MESSAGE_ROW_BLOCK = 4096
# One statement per batch, as in SQLite: the JSON of its message rows and of its records, unpacked
# by the server. The records keep their order (WITH ORDINALITY), which is the archive's clock.
_ARCHIVE_INSERT_BATCH = """
WITH new_messages AS (
    INSERT INTO messages (id, message_id, from_aid, to_aid, group_id, thread, in_reply_to, created_at, body)
    SELECT (v->>0)::bigint, v->>1, v->>2, v->>3, v->>4, v->>5, v->>6, (v->>7)::bigint, v->>8
    FROM json_array_elements(?::json) AS v
)
INSERT INTO records (owner, kind, reason, message, text, recorded_at)
SELECT v->>0, v->>1, v->>2, (v->>3)::bigint, v->>4,
       CASE WHEN (v->>5)::bigint > 0 THEN (v->>5)::bigint ELSE ?::bigint END
FROM json_array_elements(?::json) WITH ORDINALITY AS t(v, n) ORDER BY n
"""
#: Advisory lock keys (arbitrary constants, one per purpose, the same in every worker). Records get
#: their ids as they are inserted, so two workers committing at once could make a record with a
#: lower id visible after one with a higher id, and a reader following the archive by id would skip
#: it: every write transaction takes `ORDER_LOCK` first, which makes ids commit in order (the
#: transactions are short: one statement, or a journal's commit). `SCHEMA_LOCK` keeps workers that
#: start together from creating the tables at the same time (PostgreSQL's IF NOT EXISTS is not
#: safe against that).
ORDER_LOCK = 0x41554E0001
SCHEMA_LOCK = 0x41554E0002


#: Whether the caller's own session holds an advisory lock `(classid, objid)`.
_HOLDS_LOCK = (
    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()"
    " AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 2"
)
#: The sessions that hold an advisory lock `(classid, objid)`.
_LOCK_HOLDER = (
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 2"
)
_RENEW_LEASE = (
    "INSERT INTO aun_leases (worker, until) VALUES (?, clock_timestamp() + make_interval(secs => ?))"
    " ON CONFLICT (worker) DO UPDATE SET until = excluded.until"
)
#: Every worker's journal, in the database they share (`aun_runtime.distributed._journal`): each
#: table has the `worker` column first; `aun_workers` and `aun_leases` say who the workers are.
_JOURNAL_TABLES = """
CREATE TABLE IF NOT EXISTS aun_workers (worker TEXT PRIMARY KEY, lock BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    secret TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS aun_outbox (worker TEXT NOT NULL, aid TEXT NOT NULL, seq BIGINT NOT NULL,
    event BYTEA NOT NULL, PRIMARY KEY (worker, aid, seq));
CREATE TABLE IF NOT EXISTS aun_out_streams (worker TEXT NOT NULL, aid TEXT NOT NULL, last_seq BIGINT NOT NULL,
    PRIMARY KEY (worker, aid));
CREATE TABLE IF NOT EXISTS aun_in_streams (worker TEXT NOT NULL, origin TEXT NOT NULL, aid TEXT NOT NULL,
    through BIGINT NOT NULL, PRIMARY KEY (worker, origin, aid));
CREATE TABLE IF NOT EXISTS aun_in_handled (worker TEXT NOT NULL, origin TEXT NOT NULL, aid TEXT NOT NULL,
    seq BIGINT NOT NULL, PRIMARY KEY (worker, origin, aid, seq));
CREATE TABLE IF NOT EXISTS aun_leases (worker TEXT PRIMARY KEY, until TIMESTAMPTZ NOT NULL);
"""
#: Every service AID's ledger, with the `aid` column first, and each one's secret (`._service_store`).
_SERVICE_LEDGER_TABLES = """
CREATE TABLE IF NOT EXISTS svc_claims (aid TEXT NOT NULL, origin TEXT NOT NULL, seq BIGINT NOT NULL,
    instance TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0, at BIGINT NOT NULL, PRIMARY KEY (aid, origin, seq));
CREATE TABLE IF NOT EXISTS svc_streams (aid TEXT NOT NULL, origin TEXT NOT NULL, through BIGINT NOT NULL,
    PRIMARY KEY (aid, origin));
CREATE TABLE IF NOT EXISTS svc_secrets (aid TEXT PRIMARY KEY, secret TEXT NOT NULL);
"""


class PostgresDialect:
    """What PostgreSQL spells its own way. One database is shared by many owners (workers, services),
    so an owner's tables start with the owner's column."""

    name: StorageKind = "postgresql"
    shared = True

    # -- any store ----------------------------------------------------------------------------------

    def is_missing_table(self, error: BaseException) -> bool:
        return type(error).__name__ == "UndefinedTableError"  # asyncpg's, for PostgreSQL's 42P01

    def scoped(self, column: str, value: str) -> ScopedSQL:
        return ScopedSQL(column, value)

    # -- the archive ----------------------------------------------------------------------------------

    archive_row_block = MESSAGE_ROW_BLOCK
    #: The batch insert takes `ORDER_LOCK` first, which holds only inside a transaction.
    archive_batch_alone = False

    def create_tables(self, storage: Storage, schema: str) -> None:
        # Any store's tables, one creator at a time; a database whose tables are not the runtime's
        # is refused, untouched (the mark: aun_runtime.storage._schema_marker).
        from ._schema_marker import claim_schema

        with storage.transaction():
            storage.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            claim_schema(storage, schema)
            storage.script(schema)

    def check_tables(self, storage: Storage, schema: str) -> None:
        # No mark and no tables: nothing is written yet, which a reader waits for.
        from ._schema_marker import is_marked

        is_marked(storage, schema)

    def archive_tables(self, view: str) -> str:
        return _ARCHIVE_TABLES.replace("{view}", view)

    def archive_prepare_writer(self, storage: Storage) -> None:
        pass  # the batch insert is one plain statement

    def archive_message_rows(self, storage: Storage) -> int:
        return int(storage.fetch("SELECT nextval('message_row_blocks')")[0][0])

    def archive_insert_batch(self, storage: Storage, messages: str, records: str, now: int) -> None:
        # Inside the caller's transaction: the lock that makes record ids commit in order.
        storage.execute("SELECT pg_advisory_xact_lock(?)", (ORDER_LOCK,))
        storage.execute(_ARCHIVE_INSERT_BATCH, (messages, now, records))

    # -- session locks: session-level advisory locks, and leases in aun_leases -----------------------

    def try_lock(self, db: Storage, key: LockKey) -> bool:
        return bool(db.fetch("SELECT pg_try_advisory_lock(?, ?)", key)[0][0])

    def holds_lock(self, db: Storage, key: LockKey) -> bool:
        return bool(db.fetch(_HOLDS_LOCK, key))

    def unlock(self, db: Storage, key: LockKey) -> None:
        db.fetch("SELECT pg_advisory_unlock(?, ?)", key)

    def end_lock_holders(self, db: Storage, key: LockKey) -> str | None:
        db.execute("SAVEPOINT aun_fence")  # a refusal to end the session must not undo the transaction
        try:
            for (pid,) in db.fetch(_LOCK_HOLDER, key):
                db.fetch("SELECT pg_terminate_backend(?)", (int(pid),))
        except Exception as exc:  # not allowed to end it (another role)
            if getattr(exc, "sqlstate", None) is None:
                raise  # the session itself failed: not the server's answer
            db.execute("ROLLBACK TO SAVEPOINT aun_fence")
            return str(exc)
        db.execute("RELEASE SAVEPOINT aun_fence")
        return None

    def renew_lease(self, db: Storage, owner: str, seconds: float) -> None:
        db.execute(_RENEW_LEASE, (owner, seconds))

    def lease_expired(self, db: Storage, owner: str) -> bool:
        expired = db.fetch("SELECT until < clock_timestamp() FROM aun_leases WHERE worker = ?", (owner,))
        return bool(expired and expired[0][0])

    # -- a worker's journal and outbox ---------------------------------------------------------------

    journal_tables = _JOURNAL_TABLES

    def claim_worker(self, db: Storage, worker: str, lock_class: int, wait: float) -> tuple[int, str] | None:
        db.execute(
            "INSERT INTO aun_workers (worker, secret) VALUES (?, ?) ON CONFLICT (worker) DO NOTHING",
            (worker, secrets.token_hex(32)),
        )
        lock, secret = db.fetch("SELECT lock, secret FROM aun_workers WHERE worker = ?", (worker,))[0]
        deadline = time.monotonic() + wait
        while not self.try_lock(db, (lock_class, int(lock))):
            if time.monotonic() > deadline:
                raise TimeoutError(f"another session holds the lock of worker {worker}")
            time.sleep(0.05)
        return int(lock), str(secret)

    def checkpoints_by_writer(self, db: Storage, pages: int) -> bool:
        return False  # the server checkpoints its own log

    # -- a service's ledger and liveness -------------------------------------------------------------

    service_ledger_tables = _SERVICE_LEDGER_TABLES

    # -- the host's state and election: the session locks above, and aun_host_state -------------------

    # -- agent state, checkpoint, the gateway's store, the network outbox ----------------------------

    agent_states_table = """
CREATE TABLE IF NOT EXISTS agent_states (
    agent_type TEXT NOT NULL,
    agent_key TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (agent_type, agent_key)
);
"""
    outbox_table = """
CREATE TABLE IF NOT EXISTS outbox (
    id BIGINT PRIMARY KEY,
    sender TEXT NOT NULL,
    recipient TEXT,
    body TEXT NOT NULL,
    enqueued_at BIGINT NOT NULL,
    trace TEXT
);
"""

    def columns(self, storage: Storage, table: str) -> set[str]:
        rows = storage.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ?",
            (table,),
        )
        return {str(row[0]) for row in rows}


#: The PostgreSQL dialect (it holds no state: one serves every session).
POSTGRESQL: Final = PostgresDialect()


class PostgresStorage:
    """One session with a PostgreSQL server.

    Args:
        url: a `postgresql://user[:password]@host[:port]/database` URL (libpq's form; `?host=`
            for a unix socket directory works too).
        read_only: every transaction of the session is read-only (a console following an archive).
        on_lost: called once, from the connection's thread, when the session ends unasked.

    Raises:
        StorageUnavailableError: asyncpg is not installed, or the server cannot be reached or
            refuses the connection.
    """

    kind: StorageKind = "postgresql"
    dialect: Dialect = POSTGRESQL

    def __init__(
        self, url: str, *, read_only: bool = False, on_lost: Callable[[BaseException], None] | None = None
    ) -> None:
        self.location = redacted_url(url)
        self.read_only = read_only
        self.on_lost = on_lost
        self.lost: BaseException | None = None
        self._lock = threading.RLock()  # one statement (or transaction) at a time on the session
        self._closed = False
        try:
            import asyncpg  # type: ignore[import-untyped]
        except ImportError as exc:  # pragma: no cover - the extra is part of the dev install
            raise StorageUnavailableError(
                "a PostgreSQL archive needs asyncpg: pip install 'aun-runtime[postgres]'"
            ) from exc
        self._asyncpg = asyncpg
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="aun-postgres", daemon=True)
        self._thread.start()
        settings = dict(_SESSION_SETTINGS)
        if read_only:
            settings["default_transaction_read_only"] = "on"
        try:
            self._connection: Any = self._wait(
                asyncpg.connect(url, timeout=CONNECT_TIMEOUT, server_settings=settings), CONNECT_TIMEOUT + 1
            )
        except BaseException as exc:
            self._stop_loop()
            raise refusal(exc, self.location) from exc
        try:
            self._wait(_commit_durably(self._connection), CONNECT_TIMEOUT)
        except BaseException as exc:
            self._loop.call_soon_threadsafe(self._connection.terminate)
            self._stop_loop()
            raise StorageUnavailableError(f"cannot set up the session with {self.location}: {exc}") from exc
        self._connection.add_termination_listener(lambda _connection: self._ended(None))
        #: The server's process id for this session (what `pg_locks.pid` shows for its locks).
        self.backend_pid = int(self._connection.get_server_pid())

    # -- the Storage interface ------------------------------------------------------------------------

    def execute(self, sql: str, args: Sequence[object] = ()) -> None:
        self._call(lambda c: c.execute(_numbered(sql), *args) if args else c.execute(_numbered(sql)))

    def fetch(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        records = self._call(lambda c: c.fetch(_numbered(sql), *args))
        return [tuple(record) for record in records]

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        rows = list(rows)
        if rows:
            self._call(lambda c: c.executemany(_numbered(sql), rows))

    def script(self, sql: str) -> None:
        self._call(lambda c: c.execute(sql))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            self.execute("BEGIN")
            try:
                yield
            except BaseException:
                if self.lost is None:
                    with contextlib.suppress(Exception):
                        self.execute("ROLLBACK")
                raise
            self.execute("COMMIT")

    def watch(self) -> None:
        """Look at the session every `WATCH_INTERVAL` seconds when it is idle, so that `on_lost` is
        called even while nothing is committed (a worker holding a lock that others wait on)."""
        thread = threading.Thread(target=self._watch, name="aun-postgres-watch", daemon=True)
        thread.start()

    def _watch(self) -> None:
        while not self._closed and self.lost is None:
            time.sleep(WATCH_INTERVAL)
            if not self._lock.acquire(blocking=False):
                continue  # in use: that use finds out
            try:
                if self._closed or self.lost is not None:
                    return
                self._wait(self._connection.fetchval("SELECT 1"), SESSION_TIMEOUT)
            except Exception as exc:
                self._ended(exc)
            finally:
                self._lock.release()

    def close(self) -> None:
        """End the session (its advisory locks go with it) and stop the thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.lost is None:
                with contextlib.suppress(Exception):
                    self._wait(self._connection.close(timeout=2), 3)
            else:
                self._connection.terminate()
        self._stop_loop()

    # -- the session ------------------------------------------------------------------------------------

    def _call(self, statement: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the database session with {self.location} is closed")
            if self.lost is not None:
                raise StorageSessionLostError(f"the session with {self.location} has ended: {self.lost}")
            try:
                return self._wait(statement(self._connection), STATEMENT_WAIT)
            except (concurrent.futures.TimeoutError, TimeoutError) as exc:
                self._ended(exc)
                raise StorageSessionLostError(
                    f"no answer from {self.location} in {STATEMENT_WAIT:.0f} s: the session is given up"
                ) from exc
            except (self._asyncpg.InterfaceError, self._asyncpg.ConnectionDoesNotExistError, OSError) as exc:
                if self._connection.is_closed():
                    self._ended(exc)
                    raise StorageSessionLostError(f"the session with {self.location} has ended: {exc}") from exc
                raise
            except self._asyncpg.InternalClientError as exc:
                # The server ended the session (pg_terminate_backend, a shutdown): a statement that
                # comes after the driver has read the server's notice and before the connection has
                # closed finds the driver's protocol out of step ("cannot switch to state"). The
                # session is over either way; it is let go rather than used again.
                self._ended(exc)
                self._loop.call_soon_threadsafe(self._connection.terminate)
                raise StorageSessionLostError(f"the session with {self.location} has ended: {exc}") from exc

    def _wait(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def _ended(self, error: BaseException | None) -> None:
        if self._closed or self.lost is not None:
            return
        self.lost = error or StorageSessionLostError("the server closed the connection")
        # A reader's session is opened again by its reader, which says so itself.
        level = logging.INFO if self.read_only else logging.ERROR
        logger.log(level, "the database session with %s has ended: %s", self.location, self.lost)
        if self.on_lost is not None:
            self.on_lost(self.lost)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
