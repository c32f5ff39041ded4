"""What the archive holds, as its readers and its writers see it: the record kinds and the rows.

Apart from `aun_runtime.storage._archive` (which writes) and `aun_runtime.storage._archive_queries` (which reads),
since both speak of the same records and neither should import the other for its words.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, TypeAlias

from protocols.aun import AUNMessage

__all__ = [
    "AgentEntry", "AgentRow", "ArchiveRecord", "ArchiveRow", "MessageRow", "PendingRecord", "RecordKind",
]


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


#: A messages row waiting to be written: its row id, then message_id, from_aid, to, group_id,
#: thread, in_reply_to, created_at, body (JSON).
MessageRow: TypeAlias = tuple[int, str, str, str | None, str | None, str | None, str | None, int, str]
#: A record waiting to be written: owner, kind, reason, its message's row, text, created (0: when
#: the record is written).
PendingRecord: TypeAlias = tuple[str, RecordKind, str | None, int | None, str | None, int]
#: An `agents` row waiting to be written: aid, role, mode, description, card, registered_at.
AgentRow: TypeAlias = tuple[str, str, str, str, str | None, int]

