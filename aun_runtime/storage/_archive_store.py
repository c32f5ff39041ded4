"""What the archive asks of the database that keeps its records: the `ArchiveStore` protocol.

The archive (`aun_runtime.storage._archive`, which writes) and its query API (`aun_runtime.storage._archive_queries`,
which reads) never write SQL: they say what they want in these words, and a store says it in its
database's (`aun_runtime.storage._archive_sql.SQLArchiveStore`, for SQLite and PostgreSQL alike, through
the storage package's dialects). Apart from both, since both talk to it.

Every call runs on the database session the archive's writer owns (`aun_runtime.storage._archive_writer`),
handed in as `db`, under the writer's lock: one statement at a time on the session, and the writer
decides when a read sees what is still queued.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._archive_records import AgentRow, MessageRow, PendingRecord
from ._protocol import Row, Storage

__all__ = ["ArchiveStore", "RecordFilter"]


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which records a read wants (every field that is None or empty: any)."""

    owner: str | None = None  #: whose view
    group_id: str | None = None  #: only this group's messages
    peer: str | None = None  #: only direct messages exchanged with this AID
    thread: str | None = None  #: only this conversation thread
    kinds: tuple[str, ...] | None = None  #: only these kinds
    after_id: int = 0  #: only records newer than this archive id


class ArchiveStore(Protocol):
    """The archive's tables in one database."""

    #: Message row numbers the archive takes at a time from `new_message_rows` (0: it numbers them
    #: itself from the first, being the database's only writer).
    message_row_block: int

    # -- opening -------------------------------------------------------------------------------------

    def prepare(self, db: Storage, *, read_only: bool) -> int:
        """Make the tables (unless `read_only`: then only check that they are the runtime's) and
        return the first message row number this archive may use (0 when read-only)."""
        ...

    def new_message_rows(self, db: Storage) -> int:
        """The first of a new block of `message_row_block` message row numbers."""
        ...

    # -- writing -------------------------------------------------------------------------------------

    def encode(self, messages: list[MessageRow], records: list[PendingRecord]) -> Any:
        """A batch as the store writes it; runs on the event loop, so it must be cheap."""
        ...

    def write_batches(self, db: Storage, batches: Sequence[Any], now: int) -> None:
        """Write encoded batches, whole or not at all (the writer thread's one transaction)."""
        ...

    def insert_batch(self, db: Storage, batch: Any, now: int) -> None:
        """Write one encoded batch inside the caller's transaction."""
        ...

    def write_agents(self, db: Storage, rows: Iterable[AgentRow]) -> None:
        """Insert or replace `agents` rows, in one transaction."""
        ...

    def describe_agent(self, db: Storage, aid: str, description: str) -> None:
        """Set the description of a registered AID."""
        ...

    # -- reading -------------------------------------------------------------------------------------

    def select(self, db: Storage, which: RecordFilter, limit: int) -> list[Row]:
        """The newest `limit` records that match, oldest first, as `parse_record` reads them."""
        ...

    def select_after(self, db: Storage, after_id: int, limit: int) -> list[Row]:
        """The first `limit` records newer than `after_id`, oldest first."""
        ...

    def last_id(self, db: Storage) -> int:
        """The newest record's id (0: none)."""
        ...

    def agents(self, db: Storage) -> list[Row]:
        """The `agents` rows in registration order (none in an archive made before the table)."""
        ...

    def count(self, db: Storage, owner: str | None, kind: str | None) -> int:
        """How many records match."""
        ...

    def seen_keys(self, db: Storage, owner: str, limit: int) -> list[Row]:
        """The newest `limit` (sender, message_id) delivered or filtered for `owner`, newest first."""
        ...
