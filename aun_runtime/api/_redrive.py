"""Dead letters that may be delivered again: found, redriven, or dropped, each on the record.

A dead letter is **open** until a later record closes it: `redriven` (delivered again, by
[`AUNRuntime.redrive`][aun_runtime.AUNRuntime.redrive] or `aun-runtime dead-letters retry`) or
`dropped` (`aun-runtime dead-letters drop`), each naming it (`dead letter #<id>`). Closing is
recorded before the message is delivered again, so two redrives never deliver one dead letter twice;
a redriven turn that fails again makes a new dead letter, open in its turn.

Redriving a message delivers it, as it was (same id, same thread), to the agent that could not
handle it: its channel forgets the message's key first, so the delivery is not taken for a
duplicate. What the earlier tries of its turn already sent is not sent twice: an agent with a retry
policy derives each send's id from the message and its place in the turn (see
`aun_runtime.delivery._turn_retry`), and the receivers' channels drop the repeats.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..delivery._turn_retry import RETRYABLE
from ..storage._archive import Archive, ArchiveRecord, RecordKind

if TYPE_CHECKING:
    from protocols.aun import AUNMessage

    from ..delivery._endpoint import Endpoint

__all__ = ["DEAD_LETTER_SCAN", "DeadLetterFilter", "close_dead_letter", "open_dead_letters", "redrive"]

#: How many of the newest dead letters (and of the records closing them) are looked at.
DEAD_LETTER_SCAN = 100_000

_CLOSES = re.compile(r"^dead letter #(\d+)$")


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which open dead letters to take.

    Attributes:
        aid: only those of this AID (the agent that could not handle them).
        cause: only those whose reason contains this text (e.g. `ModelUnavailableError`).
        since: only those recorded at or after this time.
        until: only those recorded before this time.
        retryable_only: only those marked retryable (False: every open one).
        record_id: only the dead letter of this archive record id.
    """

    aid: str | None = None
    cause: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    retryable_only: bool = True
    record_id: int | None = None

    def takes(self, record: ArchiveRecord) -> bool:
        """Does `record` (a dead letter) pass this filter?"""
        reason = record.reason or ""
        at = datetime.fromtimestamp(record.recorded_at / 1000, UTC)
        return (
            (self.record_id is None or record.id == self.record_id)
            and (self.aid is None or record.owner == self.aid)
            and (self.cause is None or self.cause.lower() in reason.lower())
            and (self.since is None or at >= self.since)
            and (self.until is None or at < self.until)
            and (not self.retryable_only or reason.startswith(RETRYABLE))
        )


def open_dead_letters(archive: Archive, which: DeadLetterFilter = DeadLetterFilter()) -> list[ArchiveRecord]:
    """The dead letters not yet redriven or dropped that `which` takes, oldest first."""
    records = archive.records(
        kinds=[RecordKind.DEAD_LETTER, RecordKind.REDRIVEN, RecordKind.DROPPED], limit=DEAD_LETTER_SCAN
    )
    closed = {
        int(found.group(1))
        for record in records
        if record.kind is not RecordKind.DEAD_LETTER and (found := _CLOSES.match(record.reason or ""))
    }
    return [r for r in records if r.kind is RecordKind.DEAD_LETTER and r.id not in closed and which.takes(r)]


def close_dead_letter(archive: Archive, record: ArchiveRecord, kind: RecordKind) -> None:
    """Record that the dead letter `record` is `redriven` or `dropped`."""
    if kind not in (RecordKind.REDRIVEN, RecordKind.DROPPED):
        raise ValueError(f"a dead letter is closed as redriven or dropped, not {kind}")
    archive.record_event(record.owner, kind, f"dead letter #{record.id}", record.message)


async def redrive(
    archive: Archive,
    which: DeadLetterFilter,
    agent_endpoint: Callable[[str], Endpoint | None],
    redeliver: Callable[[str, AUNMessage], Awaitable[None]],
) -> list[ArchiveRecord]:
    """Deliver again the open dead letters `which` takes whose owner is a local agent
    (`agent_endpoint` gives its endpoint, None for any other AID), each closed as `redriven` first
    and taken out of its owner's dedup window; returns them, oldest first."""
    redriven: list[ArchiveRecord] = []
    for record in open_dead_letters(archive, which):
        message = record.message
        endpoint = agent_endpoint(record.owner)
        if message is None or endpoint is None:
            continue  # not a message, or not an agent of this runtime: another runtime redrives it
        close_dead_letter(archive, record, RecordKind.REDRIVEN)
        endpoint.channel.forget((message.from_aid, message.message_id))
        await redeliver(record.owner, message)
        redriven.append(record)
    return redriven
