"""The archive: every message an agent sends, receives or is shielded from, in one database.

The database is an SQLite file (the default, for one machine) or a PostgreSQL database that the
workers of several machines share (`Archive("postgresql://...")`); both through the one storage
interface of `aun_runtime.storage`. The archive says what it writes and reads in its own words
(`aun_runtime.storage._archive_store.ArchiveStore`); the SQL is `aun_runtime.storage._archive_sql`'s, and what
differs between the databases their dialects'. The reads are `aun_runtime.storage._archive_queries`'.

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

Writes are batched: records collect in memory and go to the database in one transaction when
`batch_size` records are waiting or `flush_interval` seconds after the first one, whichever
comes first, and always before any read and on [`Archive.close`][aun_runtime.Archive.close]. The inserts run in a writer
thread (`aun_runtime.storage._archive_writer`), so the event loop only appends to a list: what it
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
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from protocols.aun import AUNMessage

from ._archive_queries import ArchiveQueries
from ._archive_records import (
    AgentEntry,
    AgentRow,
    ArchiveRecord,
    ArchiveRow,
    MessageRow,
    PendingRecord,
    RecordKind,
)
from ._archive_sql import EncodedBatch, SQLArchiveStore, archive_tables
from ._archive_store import ArchiveStore
from ._archive_writer import ArchiveWriter
from ._open import (
    create_tables,  # for the owners that keep each database's tables themselves
    open_storage,
)
from ._protocol import Storage

__all__ = [
    "AGENT_BATCH_SIZE",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_FLUSH_INTERVAL",
    "AgentEntry",
    "Archive",
    "ArchiveRecord",
    "ArchiveRow",
    "MessageRow",
    "PendingRecord",
    "RecordKind",
    "create_tables",
]

#: Messages whose row id the archive remembers, so that the records of one message made in later
#: batches (a reply's receipt after its send) point to the same row. A message's records arrive
#: within moments of each other (eight batches of records cover them); one that is forgotten merely
#: gets a second row. Each costs about 250 bytes: 65,536 of them were 16 MB.
_MESSAGE_ROW_MEMORY = 4096
#: Registrations whose `agents` rows are written in one transaction. A million AIDs registered one
#: statement each spend most of their registration waiting for SQLite; in batches of this size the
#: rows cost a few microseconds each, and at most this many (about 100 bytes each) wait in memory.
AGENT_BATCH_SIZE = 4096

#: Records written per transaction. 512 amortises the commit to a few microseconds per record
#: while keeping a burst's worth of records (and their memory) small.
DEFAULT_BATCH_SIZE = 512
#: How long a record may wait in memory before it is written, in seconds.
DEFAULT_FLUSH_INTERVAL = 0.05

# A message as the messages table stores it: message_id, from_aid, to, group_id, thread,
# in_reply_to, created_at, body (JSON).
_MessageColumns = tuple[str, str, str | None, str | None, str | None, str | None, int, str]


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
        db = open_storage(self.path, read_only=read_only, tables=archive_tables)
        store: ArchiveStore = SQLArchiveStore(db.dialect)
        try:
            self._next_message_row = store.prepare(db, read_only=read_only)  # 0 when read-only: never written
        except BaseException:  # refused (tables not ours), or failed: the session is not left open
            db.close()
            raise
        self._store = store
        # Where the store hands out message rows in blocks (a database several archives write), the
        # end of this archive's block; 0: it numbers them itself.
        self._row_block_end = self._next_message_row + store.message_row_block if store.message_row_block else 0
        #: Which database holds the archive: ``"sqlite"`` or ``"postgresql"`` (for messages, never a branch).
        self.storage_kind = db.kind
        self._message_rows: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._writer = ArchiveWriter(db, self._write_batches)
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._pending: list[PendingRecord] = []
        self._pending_messages: list[MessageRow] = []
        self._pending_agents: list[AgentRow] = []
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._queries = ArchiveQueries(store, self._writer, self._hand_over, self._write_agents)
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
        if row >= self._row_block_end > 0:  # this archive's block is used up
            row = self._writer.read_committed(self._store.new_message_rows)
            self._row_block_end = row + self._store.message_row_block
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
        store = self._store
        self._writer.read(lambda db: store.describe_agent(db, aid, description))

    def _write_agents(self) -> None:
        """Write the `agents` rows waiting, in one transaction, after what is queued."""
        rows, self._pending_agents = self._pending_agents, []
        if not rows:
            return
        store = self._store
        # Under the writer's lock, after what is queued: one statement at a time on the connection.
        try:
            self._writer.read(lambda db: store.write_agents(db, rows))
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
            self._writer.submit(self._store.encode(messages, records))

    def _write_batches(self, db: Storage, batches: Sequence[EncodedBatch]) -> None:
        # Runs in the writer thread: one transaction for all the batches, written whole or not at
        # all (a failed write is kept and written again, with the row numbers its records carry).
        self._store.write_batches(db, batches, _now_ms())

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
        store = self._store
        store.insert_batch(db, store.encode(messages, records), _now_ms())

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

    # -- reading (the query API, `aun_runtime.storage._archive_queries`) -----------------------------------

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
        return self._queries.history(
            owner, group_id=group_id, peer=peer, thread=thread, kinds=kinds, after_id=after_id, limit=limit
        )

    def records(
        self, *, kinds: Iterable[RecordKind | str] | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[ArchiveRecord]:
        """All owners' records, oldest first: the last `limit` that match."""
        return self._queries.records(kinds=kinds, after_id=after_id, limit=limit)

    def records_after(self, after_id: int = 0, *, limit: int = 1000) -> list[ArchiveRecord]:
        """The *first* `limit` records newer than `after_id`, oldest first.

        Where [`records`][aun_runtime.Archive.records] answers "what happened last", this follows the archive as it grows:
        pass the last id seen and get the next page, never a record twice and never a gap.
        """
        return self._queries.records_after(after_id, limit)

    def rows_after(self, after_id: int = 0, *, limit: int = 1000) -> list[ArchiveRow]:
        """As [`records_after`][aun_runtime.Archive.records_after], but unparsed, and only what is already written.

        Each message stays the JSON it was stored as: a reader that only passes records on (a
        console sending them to a browser) skips the validation and re-encoding of every message,
        which is nearly all of the cost of a read. And it neither pushes nor waits for records still
        waiting to be written, so a reader that polls never makes the runtime wait for the disk;
        they show up at its next look, at most `flush_interval` later.
        """
        return self._queries.rows_after(after_id, limit)

    def last_id(self) -> int:
        """The id of the newest record written (0 for an empty archive); like [`rows_after`][aun_runtime.Archive.rows_after],
        it does not wait for records still waiting to be written."""
        return self._queries.last_id()

    def agents(self) -> list[AgentEntry]:
        """Every AID registered by a runtime writing this archive, in registration order."""
        return self._queries.agents()

    def dead_letters(self, limit: int = 1000) -> list[ArchiveRecord]:
        """Messages that could not be delivered or handled, oldest first."""
        return self._queries.records(kinds=[RecordKind.DEAD_LETTER], after_id=0, limit=limit)

    def count(self, *, owner: str | None = None, kind: RecordKind | str | None = None) -> int:
        """How many records match."""
        return self._queries.count(owner=owner, kind=kind)

    def seen_keys(self, owner: str, limit: int) -> list[tuple[str, str]]:
        """The newest `limit` (sender, message_id) pairs delivered or filtered for `owner`.

        A channel seeds its duplicate filter with these, so a redelivery after a restart is still
        recognised.
        """
        return self._queries.seen_keys(owner, limit)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
