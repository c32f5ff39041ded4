"""The archive's query API: what callers ask of it (histories, pages to follow, dead letters, counts).

[`Archive`][aun_runtime.Archive] answers these questions by delegating here; this module turns each
into a request to the `ArchiveStore` and its rows into records. It holds no SQL (that is the
store's) and writes nothing (that is the archive's): apart, so that what may be asked is read in
one place, and a store for another database has only rows to give.

A read that must see everything recorded so far first has the archive hand over what waits
(`settle`) and then waits for the writer (`ArchiveWriter.read`); a reader that polls anyway
(`rows_after`, `last_id`, `agents`) reads only what is committed (`ArchiveWriter.read_committed`),
so that it never makes the runtime wait for the disk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from protocols.aun import AUNMessage

from ._archive_records import AgentEntry, ArchiveRecord, ArchiveRow, RecordKind
from ._archive_store import ArchiveStore, RecordFilter
from ._archive_writer import ArchiveWriter

__all__ = ["ArchiveQueries", "parse_record"]


class ArchiveQueries:
    """Reads of one archive (see `Archive` for what each answers).

    Args:
        store: the archive's tables.
        writer: the writer that owns the database session.
        settle: hands over what waits to be written (a read that must see it calls this first).
        write_agents: writes the `agents` rows that wait (before `agents` reads them).
    """

    def __init__(
        self,
        store: ArchiveStore,
        writer: ArchiveWriter,
        settle: Callable[[], None],
        write_agents: Callable[[], None],
    ) -> None:
        self._store = store
        self._writer = writer
        self._settle = settle
        self._write_agents = write_agents

    def history(
        self,
        owner: str,
        *,
        group_id: str | None,
        peer: str | None,
        thread: str | None,
        kinds: Iterable[RecordKind | str] | None,
        after_id: int,
        limit: int,
    ) -> list[ArchiveRecord]:
        """`owner`'s records that match, oldest first: the last `limit`."""
        which = RecordFilter(owner, group_id, peer, thread, _kind_names(kinds), after_id)
        return self._select(which, limit)

    def records(self, *, kinds: Iterable[RecordKind | str] | None, after_id: int, limit: int) -> list[ArchiveRecord]:
        """All owners' records that match, oldest first: the last `limit`."""
        return self._select(RecordFilter(kinds=_kind_names(kinds), after_id=after_id), limit)

    def records_after(self, after_id: int, limit: int) -> list[ArchiveRecord]:
        """The first `limit` records newer than `after_id`, everything recorded so far included."""
        self._settle()
        store = self._store
        rows = self._writer.read(lambda db: store.select_after(db, after_id, limit))
        return [parse_record(row) for row in rows]

    def rows_after(self, after_id: int, limit: int) -> list[ArchiveRow]:
        """The first `limit` records newer than `after_id` that are committed, unparsed."""
        store = self._store
        rows = self._writer.read_committed(lambda db: store.select_after(db, after_id, limit))
        return [
            ArchiveRow(int(i), str(o), str(k), r, str(b), int(t), bool(m), None if m else a)
            for i, o, k, r, b, t, m, a in rows
        ]

    def last_id(self) -> int:
        """The id of the newest record committed (0: none)."""
        store = self._store
        return self._writer.read_committed(store.last_id)

    def agents(self) -> list[AgentEntry]:
        """Every AID registered, in registration order (this process's own written first)."""
        self._write_agents()
        rows = self._writer.read_committed(self._store.agents)
        return [
            AgentEntry(str(a), str(r), str(m), str(d), None if c is None else str(c), int(t))
            for a, r, m, d, c, t in rows
        ]

    def count(self, *, owner: str | None, kind: RecordKind | str | None) -> int:
        """How many records match, everything recorded so far included."""
        self._settle()
        store = self._store
        named = None if kind is None else str(kind)
        return self._writer.read(lambda db: store.count(db, owner, named))

    def seen_keys(self, owner: str, limit: int) -> list[tuple[str, str]]:
        """The newest `limit` (sender, message_id) pairs delivered or filtered for `owner`, oldest first."""
        self._settle()
        store = self._store
        rows = self._writer.read(lambda db: store.seen_keys(db, owner, limit))
        return [(str(a), str(m)) for a, m in reversed(rows)]

    def _select(self, which: RecordFilter, limit: int) -> list[ArchiveRecord]:
        self._settle()
        store = self._store
        rows = self._writer.read(lambda db: store.select(db, which, limit))
        return [parse_record(row) for row in rows]


def _kind_names(kinds: Iterable[RecordKind | str] | None) -> tuple[str, ...] | None:
    # RecordKind(k) refuses a kind that is none, before anything is asked of the database.
    return None if kinds is None else tuple(str(RecordKind(k)) for k in kinds)


def parse_record(row: tuple[object, ...]) -> ArchiveRecord:
    """A record from the columns a store's reads give: id, owner, kind, reason, body, recorded_at,
    whether it holds a message, and (for a thought) the id of the message it is about."""
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
