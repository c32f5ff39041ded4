"""The archive: every message an agent sends, receives or is shielded from, in one database.

The database is an SQLite file (the default, for one machine) or a PostgreSQL database that the
workers of several machines share (`Archive("postgresql://...")`); both through the one storage
interface of `aun_runtime.storage`.

Nothing that reaches a runtime is lost: each message is recorded once per agent that it concerns,
with what happened to it. The archive is what lets an agent in a `mention` group fold the talk it
was not shown into its next addressed turn, what a console draws, and what a dead letter points to.

Schema: messages are stored once, and each agent's view of them is a small record:

```text
messages                              -- one row per message, however many agents it concerns
    id           INTEGER PRIMARY KEY
    message_id   TEXT NOT NULL         -- the message's id (unique per sender)
    from_aid     TEXT NOT NULL
    to_aid       TEXT                  -- recipient of a direct message
    group_id     TEXT                  -- group of a group message
    thread       TEXT                  -- conversation thread
    in_reply_to  TEXT                  -- the message answered
    created_at   INTEGER NOT NULL      -- ms since the epoch
    body         TEXT NOT NULL         -- the whole message as JSON

records                               -- one row per agent a message (or thought) concerns
    id           INTEGER PRIMARY KEY   -- insertion order, the archive's clock
    owner        TEXT NOT NULL         -- whose view (an AID); indexed with id
    kind         TEXT NOT NULL         -- sent | received | filtered | thought | dead_letter | loop_stop | budget_stop | model_anomaly | redriven | dropped
    reason       TEXT                  -- why filtered / dead-lettered / stopped; for a thought, the
                                       -- id of the message it is about
    message      INTEGER               -- messages.id (NULL for thoughts and message-less events)
    text         TEXT                  -- a thought's text, or an event's description
    recorded_at  INTEGER NOT NULL      -- ms since the epoch

archive (a view)                      -- records joined with their messages, one row per record:
    id, owner, kind, reason, message_id, from_aid, to_aid, group_id, thread,
    in_reply_to (for a thought: the message it is about), body (message JSON or text),
    created_at, recorded_at
```

A group message to ten agents is one `messages` row and eleven `records` rows (ten receivers
and the sender), not eleven copies of its body.

And one table of who takes part, written when an AID is registered, so that a reader in another
process (a console) can tell agents from application inboxes and show each one's card:

```text
agents
    aid            TEXT PRIMARY KEY
    role           TEXT NOT NULL        -- agent | inbox
    mode           TEXT NOT NULL        -- the AUN behaviour mode (always autonomous)
    description    TEXT NOT NULL
    card           TEXT                 -- the agent's agent.md, when it has one
    registered_at  INTEGER NOT NULL     -- ms since the epoch
```

Writes are batched: records collect in memory and go to SQLite in one transaction when
`batch_size` records are waiting or `flush_interval` seconds after the first one, whichever
comes first, and always before any read and on [`Archive.close`][aun_runtime.Archive.close]. The inserts run in a writer
thread (`aun_runtime._archive_writer`), so the event loop only appends to a list: what it
appends holds a message's columns (its JSON made once, shared by all its records), not the message,
so a message is freed as soon as it is handled rather than when the writer catches up. The file
uses WAL mode so another process (a console) can read while the runtime writes:
`Archive(path, read_only=True)` opens such a file without ever writing to it, and
[`Archive.records_after`][aun_runtime.Archive.records_after] (or [`Archive.rows_after`][aun_runtime.Archive.rows_after], unparsed) follows it page by page.

A message is archived once per agent: the channel drops redeliveries before they reach the archive
(and reloads recent keys from it after a restart), so the table needs no unique index, which would
double the cost of every insert.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple, TypeAlias

from protocols.aun import AUNMessage

from ._archive_writer import ArchiveWriter
from ._schema_marker import claim_schema, is_marked
from .storage import Storage, check_sqlite_tables, is_missing_table, open_storage

__all__ = ["AgentEntry", "Archive", "ArchiveRecord", "ArchiveRow", "MessageRow", "PendingRecord", "RecordKind"]


class RecordKind(StrEnum):
    """What happened to a message, from its owner's point of view."""

    SENT = "sent"  #: the owner sent it (a publish is never delivered back to its sender)
    RECEIVED = "received"  #: delivered to the owner's handler
    FILTERED = "filtered"  #: shielded by the channel (mention mode): kept, not shown to the agent
    THOUGHT = "thought"  #: the owner's internal reasoning; never sent
    DEAD_LETTER = "dead_letter"  #: could not be delivered or handled; ``reason`` says why
    LOOP_STOP = "loop_stop"  #: the loop guard refused a send that would exceed the hop limit
    BUDGET_STOP = "budget_stop"  #: a budget refused a send or a model call; ``reason`` says which
    MODEL_ANOMALY = "model_anomaly"  #: the model answered something that is not an answer; ``reason`` says what
    REDRIVEN = "redriven"  #: a dead letter was delivered again; ``reason`` names it (``dead letter #<id>``)
    DROPPED = "dropped"  #: a dead letter was given up on by hand; ``reason`` names it (``dead letter #<id>``)


# The archive view, the same in both databases.
_ARCHIVE_VIEW = """
SELECT r.id, r.owner, r.kind,
       CASE WHEN r.kind = 'thought' THEN NULL ELSE r.reason END AS reason,
       m.message_id, m.from_aid, m.to_aid, m.group_id, m.thread,
       CASE WHEN r.kind = 'thought' THEN r.reason ELSE m.in_reply_to END AS in_reply_to,
       COALESCE(m.body, r.text, '') AS body,
       COALESCE(m.created_at, r.recorded_at) AS created_at,
       r.recorded_at
FROM records r LEFT JOIN messages m ON m.id = r.message;
"""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    message_id TEXT NOT NULL,
    from_aid TEXT NOT NULL,
    to_aid TEXT,
    group_id TEXT,
    thread TEXT,
    in_reply_to TEXT,
    created_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT,
    message INTEGER REFERENCES messages(id),
    text TEXT,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_owner ON records(owner, id);
CREATE VIEW IF NOT EXISTS archive AS
{view}CREATE TABLE IF NOT EXISTS agents (
    aid TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    mode TEXT NOT NULL,
    description TEXT NOT NULL,
    card TEXT,
    registered_at INTEGER NOT NULL
);
""".replace("{view}", _ARCHIVE_VIEW)

# A batch is written by one statement: the JSON of its message rows and of its records inserted into
# a view whose trigger fills both tables (see _encode for why).
_BATCH_SCHEMA = """
CREATE TEMP VIEW IF NOT EXISTS archive_batch (messages, records, now) AS SELECT NULL, NULL, NULL;
CREATE TEMP TRIGGER IF NOT EXISTS archive_batch_insert INSTEAD OF INSERT ON archive_batch BEGIN
    INSERT INTO messages (id, message_id, from_aid, to_aid, group_id, thread, in_reply_to, created_at, body)
    SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8
    FROM json_each(NEW.messages) ORDER BY key;
    INSERT INTO records (owner, kind, reason, message, text, recorded_at)
    SELECT value->>0, value->>1, value->>2, value->>3, value->>4,
           CASE WHEN value->>5 > 0 THEN value->>5 ELSE NEW.now END
    FROM json_each(NEW.records) ORDER BY key;
END;
"""
_INSERT_BATCH = "INSERT INTO archive_batch (messages, records, now) VALUES (?, ?, ?)"

# The same tables in PostgreSQL, shared by the workers of several machines. Message rows are numbered
# by the archives themselves, as in SQLite, from blocks of `MESSAGE_ROW_BLOCK` numbers each archive
# takes from a sequence, so that two workers never give two messages one number.
_PG_SCHEMA = """
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
""".replace("{view}", _ARCHIVE_VIEW)
#: Message row numbers an archive on PostgreSQL takes at a time (the sequence's increment): one
#: round trip to the server per 4,096 messages; numbers of a block left unused when a worker stops
#: are merely skipped.
MESSAGE_ROW_BLOCK = 4096
# One statement per batch, as in SQLite: the JSON of its message rows and of its records, unpacked
# by the server. The records keep their order (WITH ORDINALITY), which is the archive's clock.
_PG_INSERT_BATCH = """
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


def create_tables(storage: Storage, sqlite_schema: str, postgres_schema: str) -> None:
    """Create tables (if missing) in either database; on PostgreSQL, one creator at a time."""
    if storage.kind == "sqlite":
        check_sqlite_tables(storage, sqlite_schema, storage.location)  # a file whose tables are not ours: refused
        storage.script(sqlite_schema)
        return
    with storage.transaction():
        storage.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
        claim_schema(storage, postgres_schema)  # a database whose tables are not ours is refused, untouched
        storage.script(postgres_schema)
_batch_json = json.JSONEncoder(ensure_ascii=False, check_circular=False, separators=(",", ":")).encode


#: Characters of JSON one batch statement takes at most when it joins batches. Far under SQLite's
#: limit on a string (a billion bytes), and small enough that joining never holds much memory
#: twice: hundreds of batches of small messages, or a few of messages near the payload bound.
MAX_STATEMENT_CHARS = 32 * 1024 * 1024

#: Messages whose row id the archive remembers, so that the records of one message made in later
#: batches (a reply's receipt after its send) point to the same row. A message's records arrive
#: within moments of each other (eight batches of records cover them); one that is forgotten merely
#: gets a second row. Each costs about 250 bytes: 65,536 of them were 16 MB.
_MESSAGE_ROW_MEMORY = 4096
#: Registrations whose `agents` rows are written in one transaction. A million AIDs registered one
#: statement each spend most of their registration waiting for SQLite; in batches of this size the
#: rows cost a few microseconds each, and at most this many (about 100 bytes each) wait in memory.
AGENT_BATCH_SIZE = 4096
_COLUMNS = "id, owner, kind, reason, body, recorded_at, message_id IS NOT NULL, in_reply_to"

#: Records written per transaction. 512 amortises the commit to a few microseconds per record
#: while keeping a burst's worth of records (and their memory) small.
DEFAULT_BATCH_SIZE = 512
#: How long a record may wait in memory before it is written, in seconds.
DEFAULT_FLUSH_INTERVAL = 0.05


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """One archived fact: a message as its owner saw it, or a thought, dead letter or loop stop."""

    id: int
    owner: str
    kind: RecordKind
    reason: str | None
    message: AUNMessage | None
    text: str | None
    recorded_at: int
    about: str | None = None  #: for a thought: the id of the message it was about


class ArchiveRow(NamedTuple):
    """A record as stored, unparsed: for readers that pass messages on as JSON (a console)."""

    id: int
    owner: str
    kind: str
    reason: str | None
    body: str  #: the message's JSON when ``is_message``, else the thought's or event's text
    recorded_at: int
    is_message: bool
    about: str | None  #: for a thought: the id of the message it was about


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """An AID registered with a runtime that writes this archive."""

    aid: str
    role: str  #: ``agent``, or ``inbox`` for an application's inbox
    mode: str  #: the AUN behaviour mode: ``autonomous``
    description: str
    card: str | None  #: the agent's agent.md text, when it has one
    registered_at: int


# A message as the messages table stores it: message_id, from_aid, to, group_id, thread,
# in_reply_to, created_at, body (JSON).
_MessageColumns = tuple[str, str, str | None, str | None, str | None, str | None, int, str]
#: A messages row waiting to be written: its row id, then its columns.
MessageRow: TypeAlias = tuple[int, str, str, str | None, str | None, str | None, str | None, int, str]
#: A record waiting to be written: owner, kind, reason, its message's row, text, created (0: when
#: the record is written).
PendingRecord: TypeAlias = tuple[str, RecordKind, str | None, int | None, str | None, int]
# What the writer thread takes: the JSON of a batch's message rows and of its records.
_EncodedBatch = tuple[str, str]


def _columns(message: AUNMessage) -> _MessageColumns:
    return (
        message.message_id,
        message.from_aid,
        message.to,
        message.group_id,
        message.thread,
        message.in_reply_to,
        message.created_at,
        message.to_json(),
    )


def _encode(messages: list[MessageRow], records: list[PendingRecord]) -> _EncodedBatch:
    """A batch as the JSON its statement reads.

    Encoding happens on the event loop, in two calls into C (a few microseconds a record), because
    the writer thread must need the GIL as little as possible: whenever it gives the GIL up
    (around every SQLite call) and wants it back, it waits while a busy event loop holds it, often
    for tens of milliseconds, and any Python work it does stretches the same way. A writer that
    only runs one statement per batch keeps up with the loop; one that encoded the batch, or bound
    rows value by value, fell behind it.
    """
    return _batch_json(messages), _batch_json(records)


def _statements(batches: Sequence[_EncodedBatch]) -> list[_EncodedBatch]:
    """The batches joined into as few statements' worth of JSON as `MAX_STATEMENT_CHARS` allows."""
    statements: list[_EncodedBatch] = []
    group: list[_EncodedBatch] = []
    size = 0
    for batch in batches:
        length = len(batch[0]) + len(batch[1])
        if group and size + length > MAX_STATEMENT_CHARS:
            statements.append(_joined(group))
            group, size = [], 0
        group.append(batch)
        size += length
    statements.append(_joined(group))
    return statements


def _joined(batches: list[_EncodedBatch]) -> _EncodedBatch:
    if len(batches) == 1:
        return batches[0]
    return _join_json_arrays([batch[0] for batch in batches]), _join_json_arrays([batch[1] for batch in batches])


def _join_json_arrays(arrays: Sequence[str]) -> str:
    """One JSON array of the elements of several (string work only: nothing is parsed)."""
    return "[" + ",".join([array[1:-1] for array in arrays if array != "[]"]) + "]"


class Archive:
    """An append-only record of everything agents send, receive, think and fail to deliver.

    Args:
        path: the SQLite file (created with its directory if missing), `":memory:"`, or a
            `postgresql://` URL of the database several machines share.
        batch_size: records per write transaction.
        flush_interval: seconds a record may wait before it is written.
        read_only: open an existing file without ever writing to it (to follow an archive that
            another process writes). Recording then raises.

    Raises:
        FileNotFoundError: `read_only` and there is no file at `path`.

    Example:
        >>> archive = Archive(":memory:")
        >>> archive.record_thought("coder.local", "the test needs a fixture")
        >>> [r.text for r in archive.history("coder.local")]
        ['the test needs a fixture']
        >>> archive.close()
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        read_only: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.path = str(path)
        self.read_only = read_only
        db = open_storage(self.path, read_only=read_only, tables=_SCHEMA)
        self._row_block_end = 0  # PostgreSQL: the end of this archive's block of message row numbers
        try:
            if read_only:
                self._next_message_row = 0  # never written
                if db.kind == "postgresql":  # no mark and no tables: nothing written yet, which a reader waits for
                    is_marked(db, _PG_SCHEMA)
            else:
                create_tables(db, _SCHEMA, _PG_SCHEMA)
                if db.kind == "sqlite":
                    db.script(_BATCH_SCHEMA)
                    self._next_message_row = int(db.fetch("SELECT COALESCE(MAX(id), 0) + 1 FROM messages")[0][0])
                else:
                    self._next_message_row = _row_block(db)
                    self._row_block_end = self._next_message_row + MESSAGE_ROW_BLOCK
        except BaseException:  # refused (tables not ours), or failed: the session is not left open
            db.close()
            raise
        #: Which database holds the archive: ``"sqlite"`` or ``"postgresql"``.
        self.storage_kind = db.kind
        self._message_rows: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._writer = ArchiveWriter(db, self._write_batches)
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._pending: list[PendingRecord] = []
        self._pending_messages: list[MessageRow] = []
        self._pending_agents: list[tuple[str, str, str, str, str | None, int]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._thought_watchers: list[Callable[[str, str, str | None], None]] = []

    @property
    def shown(self) -> str:
        """Where the archive is, for messages and pages: its path, or its URL with any password hidden."""
        return self._writer.storage.location

    # -- writing -----------------------------------------------------------------------------------

    def record(self, owner: str, kind: RecordKind, message: AUNMessage, reason: str | None = None) -> None:
        """Record `message` in `owner`'s view."""
        self._add(self._message_record(owner, kind, reason, message, None, 0))

    def record_thought(self, owner: str, text: str, about: str | None = None) -> None:
        """Record an internal thought of `owner`, optionally about a message (its id). Never sent."""
        self._add((owner, RecordKind.THOUGHT, about, None, text, _now_ms()))
        for watcher in self._thought_watchers:
            watcher(owner, text, about)

    def watch_thoughts(self, watcher: Callable[[str, str, str | None], None]) -> Callable[[], None]:
        """Call `watcher(owner, text, about)` after each thought recorded in this process, until the
        returned function is called (a gateway agent that shows thoughts to the network uses it).

        A watcher runs inside `record_thought`: it must be quick and must not raise.
        """
        self._thought_watchers.append(watcher)

        def stop() -> None:
            if watcher in self._thought_watchers:
                self._thought_watchers.remove(watcher)

        return stop

    def record_event(self, owner: str, kind: RecordKind, reason: str, message: AUNMessage | None) -> None:
        """Record a dead letter or loop stop, with or without the message it concerns."""
        if message is None:
            self._add((owner, kind, reason, None, reason, _now_ms()))
        else:
            self._add(self._message_record(owner, kind, reason, message, None, _now_ms()))

    def _message_record(
        self, owner: str, kind: RecordKind, reason: str | None, message: AUNMessage, text: str | None, created: int
    ) -> PendingRecord:
        # The message's row is numbered, and queued, with its first record: the records that
        # follow (its receipt after its send, the members of a group) carry only the number.
        known = self._message_rows
        key = (message.from_aid, message.message_id)
        row = known.get(key)
        if row is None:
            row = known[key] = self._new_message_row()
            if len(known) > _MESSAGE_ROW_MEMORY:
                known.popitem(last=False)
            self._add_message((row, *_columns(message)))
        return (owner, kind, reason, row, text, created)

    def _new_message_row(self) -> int:
        row = self._next_message_row
        if row >= self._row_block_end > 0:  # PostgreSQL: this archive's block is used up
            row = self._writer.read_committed(_row_block)
            self._row_block_end = row + MESSAGE_ROW_BLOCK
        self._next_message_row = row + 1
        return row

    def _forget_rows(self, rows: Iterable[MessageRow]) -> None:
        """Message rows that will never be written: the next record of each message queues it again."""
        for row in rows:
            self._message_rows.pop((row[2], row[1]), None)

    def record_agent(
        self, aid: str, *, role: str, mode: str, description: str, card: str | None = None
    ) -> None:
        """Record that `aid` takes part.

        Written with the records, within `flush_interval` seconds, at the next `flush` or read, or
        at once after `AGENT_BATCH_SIZE` registrations: one transaction for the lot. A reader in
        another process (a console) sees the AID once its row is committed.
        """
        self._check_writable()
        self._pending_agents.append((aid, role, mode, description, card, _now_ms()))
        if len(self._pending_agents) >= AGENT_BATCH_SIZE:
            self._write_agents()
        else:
            self._arm_timer()

    def describe_agent(self, aid: str, description: str) -> None:
        """Set the description of `aid`, recorded before (its factory gave none; its instance does)."""
        self._check_writable()
        self._write_agents()  # its row first
        self._writer.read(
            lambda db: db.execute("UPDATE agents SET description = ? WHERE aid = ?", (description, aid))
        )

    def _write_agents(self) -> None:
        """Write the `agents` rows waiting, in one transaction, after what is queued."""
        rows, self._pending_agents = self._pending_agents, []
        if not rows:
            return

        def insert(db: Storage) -> None:
            with db.transaction():
                db.executemany(
                    "INSERT INTO agents (aid, role, mode, description, card, registered_at) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (aid) DO UPDATE SET role = excluded.role, mode = excluded.mode,"
                    " description = excluded.description, card = excluded.card,"
                    " registered_at = excluded.registered_at",
                    rows,
                )

        # Under the writer's lock, after what is queued: one statement at a time on the connection.
        try:
            self._writer.read(insert)
        except BaseException:
            self._pending_agents[:0] = rows  # not lost: written with the next ones
            raise

    def _check_writable(self) -> None:
        if self._closed:
            raise RuntimeError("the archive is closed")
        if self.read_only:
            raise RuntimeError(f"the archive {self.shown} was opened read-only")

    def _add(self, item: PendingRecord) -> None:
        self._check_writable()
        self._pending.append(item)
        if len(self._pending) >= self._batch_size:
            self._hand_over()
        elif self._timer is None:
            self._arm_timer()

    def _arm_timer(self) -> None:
        """Write what waits within `flush_interval` seconds, unless it is written sooner."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next read or close writes it
        self._timer = loop.call_later(self._flush_interval, self._hand_over)

    def _add_message(self, row: MessageRow) -> None:
        # Always followed by the _add of the record that numbered it, which decides about writing.
        self._pending_messages.append(row)

    def _hand_over(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending_agents:
            self._write_agents()
        if self._pending:
            messages, self._pending_messages = self._pending_messages, []
            records, self._pending = self._pending, []
            self._writer.submit(_encode(messages, records))

    def _write_batches(self, db: Storage, batches: Sequence[_EncodedBatch]) -> None:
        # Runs in the writer thread: one transaction for all the batches, written whole or not at
        # all (a failed write is kept and written again, with the row numbers its records carry).
        # On SQLite, usually one statement is that transaction (the connection is in autocommit
        # mode); batches of large messages that would make one statement too long go in several,
        # inside one transaction. A batch is never split.
        now = _now_ms()
        statements = _statements(batches)
        if db.kind == "sqlite" and len(statements) == 1:
            db.execute(_INSERT_BATCH, (*statements[0], now))
            return
        with db.transaction():
            for messages, records in statements:
                _insert_batch(db, messages, records, now)

    def write_batch(self, db: Storage, messages: list[MessageRow], records: list[PendingRecord]) -> None:
        """Write message rows and the records that number them in one statement, inside the caller's transaction.

        For a subclass that keeps tables of its own in the archive's database and must commit its
        rows together with the records (a distributed worker's journal): it opens a transaction on
        the archive's storage (in a function it hands to the writer's `read`), calls this, writes
        its own rows and commits. The batch is encoded and written as the archive writes its own.

        Args:
            db: the archive's storage (on SQLite, the statement uses a view that only it has).
            messages: the message rows the records point to, in row order (not yet written).
            records: the records, in the order they were made.
        """
        _insert_batch(db, *_encode(messages, records), _now_ms())

    def flush(self) -> None:
        """Write every waiting record now and wait until it is committed."""
        self._hand_over()
        self._writer.wait()

    async def committed(self) -> None:
        """Wait, without blocking the event loop, until every record made so far is committed.

        What [`flush`][aun_runtime.Archive.flush] does for code that must not stall the loop while the disk works: a bridge
        that acknowledges a message to the network only once its record is safe on disk.

        Raises:
            ArchiveWriteError: a write failed; the records are kept for the next flush.
        """
        self._check_writable()
        self._hand_over()
        await asyncio.wrap_future(self._writer.barrier())

    @property
    def transactions(self) -> int:
        """Write transactions committed so far (one per batch, or per batches that waited together)."""
        return self._writer.transactions

    def close(self) -> None:
        """Write what is waiting and close the file. Idempotent."""
        if self._closed:
            return
        self._hand_over()
        self._closed = True
        self._writer.close()

    # -- reading -----------------------------------------------------------------------------------

    def history(
        self,
        owner: str,
        *,
        group_id: str | None = None,
        peer: str | None = None,
        thread: str | None = None,
        kinds: Iterable[RecordKind | str] | None = None,
        after_id: int = 0,
        limit: int = 100,
    ) -> list[ArchiveRecord]:
        """`owner`'s records, oldest first: the last `limit` of them that match.

        Args:
            owner: whose view.
            group_id: only this group's messages.
            peer: only direct messages exchanged with this AID.
            thread: only this conversation thread.
            kinds: only these kinds (default: all).
            after_id: only records newer than this archive id.
            limit: at most this many (the newest ones).
        """
        where = ["owner = ?", "id > ?"]
        args: list[object] = [owner, after_id]
        if group_id is not None:
            where.append("group_id = ?")
            args.append(group_id)
        if peer is not None:
            where.append("group_id IS NULL AND (from_aid = ? OR to_aid = ?)")
            args += [peer, peer]
        if thread is not None:
            where.append("thread = ?")
            args.append(thread)
        where.append(_kinds_clause(kinds, args))
        return self._select(" AND ".join(where), args, limit)

    def records(
        self, *, kinds: Iterable[RecordKind | str] | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[ArchiveRecord]:
        """All owners' records, oldest first: the last `limit` that match."""
        args: list[object] = [after_id]
        clause = "id > ? AND " + _kinds_clause(kinds, args)
        return self._select(clause, args, limit)

    def records_after(self, after_id: int = 0, *, limit: int = 1000) -> list[ArchiveRecord]:
        """The *first* `limit` records newer than `after_id`, oldest first.

        Where [`records`][aun_runtime.Archive.records] answers "what happened last", this follows the archive as it grows:
        pass the last id seen and get the next page, never a record twice and never a gap.
        """
        self._hand_over()
        sql = f"SELECT {_COLUMNS} FROM archive WHERE id > ? ORDER BY id LIMIT ?"
        rows = self._writer.read(lambda db: db.fetch(sql, (after_id, limit)))
        return [_record(row) for row in rows]

    def rows_after(self, after_id: int = 0, *, limit: int = 1000) -> list[ArchiveRow]:
        """As [`records_after`][aun_runtime.Archive.records_after], but unparsed, and only what is already written.

        Each message stays the JSON it was stored as: a reader that only passes records on (a
        console sending them to a browser) skips the validation and re-encoding of every message,
        which is nearly all of the cost of a read. And it neither pushes nor waits for records still
        waiting to be written, so a reader that polls never makes the runtime wait for the disk;
        they show up at its next look, at most `flush_interval` later.
        """
        sql = f"SELECT {_COLUMNS} FROM archive WHERE id > ? ORDER BY id LIMIT ?"
        rows = self._writer.read_committed(lambda db: db.fetch(sql, (after_id, limit)))
        return [
            ArchiveRow(int(i), str(o), str(k), r, str(b), int(t), bool(m), None if m else a)
            for i, o, k, r, b, t, m, a in rows
        ]

    def last_id(self) -> int:
        """The id of the newest record written (0 for an empty archive); like [`rows_after`][aun_runtime.Archive.rows_after],
        it does not wait for records still waiting to be written."""
        sql = "SELECT MAX(id) FROM records"
        return int(self._writer.read_committed(lambda db: db.fetch(sql)[0][0] or 0))

    def agents(self) -> list[AgentEntry]:
        """Every AID registered by a runtime writing this archive, in registration order."""
        sql = "SELECT aid, role, mode, description, card, registered_at FROM agents ORDER BY registered_at"
        if self._pending_agents:
            self._write_agents()  # this process's own registrations, not yet written
        try:
            rows = self._writer.read_committed(lambda db: db.fetch(sql))
        except Exception as exc:
            if not is_missing_table(exc):
                raise
            return []  # an archive written before the table existed
        return [
            AgentEntry(str(a), str(r), str(m), str(d), None if c is None else str(c), int(t))
            for a, r, m, d, c, t in rows
        ]

    def dead_letters(self, limit: int = 1000) -> list[ArchiveRecord]:
        """Messages that could not be delivered or handled, oldest first."""
        return self.records(kinds=[RecordKind.DEAD_LETTER], limit=limit)

    def count(self, *, owner: str | None = None, kind: RecordKind | str | None = None) -> int:
        """How many records match."""
        self._hand_over()
        where, args = ["1 = 1"], []
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if kind is not None:
            where.append("kind = ?")
            args.append(str(kind))
        sql = f"SELECT COUNT(*) FROM archive WHERE {' AND '.join(where)}"
        return int(self._writer.read(lambda db: db.fetch(sql, args)[0][0]))

    def seen_keys(self, owner: str, limit: int) -> list[tuple[str, str]]:
        """The newest `limit` (sender, message_id) pairs delivered or filtered for `owner`.

        A channel seeds its duplicate filter with these, so a redelivery after a restart is still
        recognised.
        """
        self._hand_over()
        sql = (
            "SELECT from_aid, message_id FROM archive WHERE owner = ? AND kind IN ('received', 'filtered')"
            " ORDER BY id DESC LIMIT ?"
        )
        rows = self._writer.read(lambda db: db.fetch(sql, (owner, limit)))
        return [(str(a), str(m)) for a, m in reversed(rows)]

    def _select(self, where: str, args: Sequence[object], limit: int) -> list[ArchiveRecord]:
        self._hand_over()
        sql = f"SELECT {_COLUMNS} FROM archive WHERE {where} ORDER BY id DESC LIMIT ?"
        rows = self._writer.read(lambda db: db.fetch(sql, [*args, limit]))
        return [_record(row) for row in reversed(rows)]


def _row_block(db: Storage) -> int:
    """The first of a new block of `MESSAGE_ROW_BLOCK` message row numbers (PostgreSQL)."""
    return int(db.fetch("SELECT nextval('message_row_blocks')")[0][0])


def _insert_batch(db: Storage, messages: str, records: str, now: int) -> None:
    if db.kind == "sqlite":
        db.execute(_INSERT_BATCH, (messages, records, now))
        return
    # Inside the caller's transaction: the lock that makes record ids commit in order.
    db.execute("SELECT pg_advisory_xact_lock(?)", (ORDER_LOCK,))
    db.execute(_PG_INSERT_BATCH, (messages, now, records))


def _kinds_clause(kinds: Iterable[RecordKind | str] | None, args: list[object]) -> str:
    if kinds is None:
        return "1 = 1"
    names = [str(RecordKind(k)) for k in kinds]
    args.extend(names)
    return f"kind IN ({', '.join('?' * len(names))})"


def _record(row: tuple[object, ...]) -> ArchiveRecord:
    record_id, owner, kind, reason, body, recorded_at, is_message, about = row
    text = str(body)
    message = AUNMessage.model_validate_json(text) if is_message else None
    return ArchiveRecord(
        id=int(record_id),  # type: ignore[call-overload]
        owner=str(owner),
        kind=RecordKind(str(kind)),
        reason=None if reason is None else str(reason),
        message=message,
        text=message.text if message else text,
        recorded_at=int(recorded_at),  # type: ignore[call-overload]
        about=None if message or about is None else str(about),
    )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
