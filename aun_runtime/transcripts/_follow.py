"""The transcript as it grows: one line per new archive record, for a run that serves.

A served run cannot wait for the end to print its transcript (there may be no end), and the nested
transcript of `render_transcript` is not append-only: a reply is placed under
what it answers, far above the last line printed. So a run prints one line per record as it comes,
in the order it happened, never reprinting: each message gets the number the final transcript gives
it (in order of first appearance), and a reply says which one it answers (`re #3`), so the thread
can still be followed. Deliveries are not printed (the message's own line says it went out); what
went wrong (dead letters, loop and budget stops) stands out with `!!`, as in the transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Iterable
from typing import TextIO

from protocols.aun import AUNMessage

from ..storage import is_missing_table
from ..storage._archive import Archive, ArchiveRecord, RecordKind
from ._reconnect import Reconnection, is_connection_lost
from ._transcript import ArchiveRoles, message_line, snip

__all__ = ["DEFAULT_FOLLOW_INTERVAL", "TranscriptFollower", "follow_archive"]

#: Seconds between two looks at the archive.
DEFAULT_FOLLOW_INTERVAL = 0.2


class TranscriptFollower:
    """Turns archive records, oldest first, into transcript lines, one per record worth showing."""

    def __init__(self, *, is_agent: Callable[[str], bool] = lambda _: True) -> None:
        # A run passes `ArchiveRoles(archive)`: who is an agent as its archive says, for records of
        # earlier runs on the same file too (never a guess from what is registered at the moment).
        self.is_agent = is_agent
        self.last_id = 0
        self._number: dict[str, int] = {}

    def _message_line(self, message: AUNMessage, tags: list[str]) -> str:
        self._number.setdefault(message.message_id, len(self._number) + 1)  # numbered on first sight
        return message_line(message, self._number, self.is_agent, tags)

    def lines(self, records: Iterable[ArchiveRecord]) -> list[str]:
        """The lines of `records`, each prefixed with the time it was recorded (HH:MM:SS).

        All or nothing: if telling an agent raises (its archive went away), the follower is left as
        it was, so the same records are read and shown again, once, by the next call."""
        out: list[str] = []
        last_id, numbers = self.last_id, dict(self._number)
        try:
            for record in records:
                start = len(out)
                self._record_lines(record, out)
                stamp = time.strftime("%H:%M:%S", time.localtime(record.recorded_at / 1000))
                out[start:] = [f"{stamp} {line}" for line in out[start:]]
        except BaseException:
            self.last_id, self._number = last_id, numbers
            raise
        return out

    def _record_lines(self, record: ArchiveRecord, out: list[str]) -> None:
        self.last_id = max(self.last_id, record.id)
        message = record.message
        known = message is not None and message.message_id in self._number
        if record.kind is RecordKind.SENT and message is not None and not known:
            out.append(self._message_line(message, []))
        elif record.kind in (RecordKind.RECEIVED, RecordKind.FILTERED) and message is not None:
            if not known:  # sent elsewhere (through a gateway, another worker)
                out.append(self._message_line(message, ["from outside"]))
            if record.kind is RecordKind.FILTERED:
                number = self._number[message.message_id]
                out.append(
                    f"    #{number} filtered for {record.owner} ({record.reason or 'filtered'}; archived)"
                )
        elif record.kind is RecordKind.THOUGHT:
            out.append(f"    ({record.owner} thinks: {snip(record.text)})")
        elif record.kind is RecordKind.DEAD_LETTER:
            if message is not None and not known:  # never sent: its recipient does not exist
                out.append(self._message_line(message, ["dead letter"]))
            about = f" (#{self._number[message.message_id]})" if message is not None else ""
            out.append(f"!! DEAD LETTER at {record.owner}{about}: {record.reason}")
        elif record.kind is RecordKind.LOOP_STOP:
            out.append(f"!! LOOP GUARD stopped {record.owner}: {record.reason}")
        elif record.kind is RecordKind.BUDGET_STOP:
            out.append(f"!! BUDGET STOP for {record.owner}: {record.reason}")
        elif record.kind is RecordKind.MODEL_ANOMALY:
            out.append(f"!! MODEL ANOMALY for {record.owner}: {record.reason}")
        elif record.kind in (RecordKind.REDRIVEN, RecordKind.DROPPED):
            out.append(f"-- {record.reason} of {record.owner} {record.kind.value}")


async def follow_archive(
    archive: Archive,
    follower: TranscriptFollower,
    *,
    interval: float = DEFAULT_FOLLOW_INTERVAL,
    out: TextIO | None = None,
    reopen: Callable[[], Archive] | None = None,
) -> None:
    """Print new records' lines every `interval` seconds until cancelled (then once more).

    With `reopen` (a reader's own read-only archive: it opens the same one again), a database that
    goes away is opened again, with backoff (`aun_runtime.transcripts._reconnect`), and the lines go on after
    the last record shown; one line on stderr says it went away, one that it is back."""
    stream = out or sys.stdout
    if reopen is not None:
        await _follow_reopening(archive, follower, reopen, interval, stream)
        return
    try:
        while True:
            _print_new_if_written(archive, follower, stream)
            await asyncio.sleep(interval)
    finally:
        _print_new_if_written(archive, follower, stream)


async def _follow_reopening(
    archive: Archive, follower: TranscriptFollower, reopen: Callable[[], Archive], interval: float, out: TextIO
) -> None:
    current: Archive | None = archive
    reconnection = Reconnection(archive.shown, _say)
    try:
        while True:
            if current is None:
                try:
                    current = await asyncio.to_thread(reopen)  # connecting may wait: never on the loop
                except Exception as exc:
                    if not is_connection_lost(exc):
                        raise
                    reconnection.lost(exc)
                    await asyncio.sleep(reconnection.wait())
                    continue
                follower.is_agent = ArchiveRoles(current)
                reconnection.back(f"going on after record id {follower.last_id}")
            try:
                _print_new_if_written(current, follower, out)
            except Exception as exc:
                if not is_connection_lost(exc):
                    raise
                reconnection.lost(exc)
                _close_lost(current)
                current = None
                await asyncio.sleep(reconnection.wait())
                continue
            await asyncio.sleep(interval)
    finally:
        if current is not None:
            try:
                _print_new_if_written(current, follower, out)
            except Exception as exc:
                if not is_connection_lost(exc):
                    raise
            if current is not archive:  # the caller closes the one it gave
                current.close()


def _close_lost(archive: Archive) -> None:
    # Its session is gone: closing only lets go of what is left of it (the driver's thread).
    with contextlib.suppress(Exception):
        archive.close()


def _say(text: str) -> None:
    print(f"aun-runtime: {text}", file=sys.stderr, flush=True)


def _print_new_if_written(archive: Archive, follower: TranscriptFollower, out: TextIO) -> None:
    # A follower may start before any runtime has made the archive's tables (a PostgreSQL archive
    # exists as soon as its database does): it waits for them rather than ending.
    try:
        print_new(archive, follower, out)
    except Exception as exc:
        if not is_missing_table(exc):
            raise


def print_new(archive: Archive, follower: TranscriptFollower, out: TextIO | None = None) -> None:
    """Print the lines of every record newer than the last one printed."""
    stream = out or sys.stdout
    while True:
        records = archive.records_after(follower.last_id, limit=1000)
        if not records:
            break
        for line in follower.lines(records):
            print(line, file=stream)
        stream.flush()
