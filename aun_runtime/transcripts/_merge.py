"""One transcript from the archives of several runtimes (the workers of a cluster, or runtimes
joined through gateways): `aun-runtime transcript --archive A --archive B`.

Each archive is opened read-only (a runtime may still be writing it). Records are merged by the
time they were recorded, each archive's own order kept and ties going to the archive named first;
a message recorded `sent` in one archive and `received` in another is one message, delivered
there, and the same record found in two archives is shown once.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ..storage import is_missing_table
from ..storage._archive import Archive, ArchiveRecord
from ._transcript import ArchiveRoles, render_transcript

__all__ = ["merge_records", "merged_transcript"]

_PAGE = 10_000


def _all_records(archive: Archive) -> list[ArchiveRecord]:
    records: list[ArchiveRecord] = []
    try:
        while page := archive.records_after(records[-1].id if records else 0, limit=_PAGE):
            records.extend(page)
    except Exception as exc:
        if not is_missing_table(exc):
            raise
        return []  # a database no runtime has written yet: nothing to show
    return records


def merge_records(archives: Sequence[Archive]) -> list[ArchiveRecord]:
    """Every record of `archives`, by recorded time (stable), each fact once."""
    merged: list[ArchiveRecord] = []
    seen: set[tuple[str, str, str, str | None]] = set()
    for record in heapq.merge(*(_all_records(a) for a in archives), key=lambda r: r.recorded_at):
        if record.message is not None:
            key = (record.owner, str(record.kind), record.message.message_id, record.reason)
            if key in seen:
                continue
            seen.add(key)
        merged.append(record)
    return merged


def merged_transcript(paths: Sequence[str]) -> str:
    """The transcript of the archive files at `paths`, merged (see the module's docstring)."""
    archives = [Archive(path, read_only=True) for path in paths]
    try:
        records = merge_records(archives)
        roles = ArchiveRoles(*archives)
        return render_transcript(records, is_agent=roles)
    finally:
        for archive in archives:
            archive.close()
