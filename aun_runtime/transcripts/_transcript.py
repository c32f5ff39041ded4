"""A readable transcript of an archive, written the way AUN asks clients to show traffic.

* A message nobody answered is *delivered*, never an error: silence is a legal answer.
* Replies are listed under the message they answer, however many there are. What a message answers
  is said once, in `answered`: the message it names (`in_reply_to`), or else, for a message sent
  while its sender handled a thread, that thread's first message. Its replies are counted by
  `counts_as_reply`: tool annotations are listed among them but are not replies (they are notes on
  the sender's own tool use), as `Inbox.replies_to` leaves them out. The console counts the same way.
* A message that answers nothing is marked as starting a conversation (`proactive` when an agent,
  not an application's inbox, started it, as the archive's agents table says: `ArchiveRoles`).
* What a channel kept from an agent is shown as filtered and archived, not as lost.
* Dead letters, loop-guard stops and budget stops stand out, because those are the real failures.
  A message that never got out (its recipient does not exist) is still listed where it belongs,
  among the replies it was meant to be, marked as a dead letter.
* A message sent from outside this archive's runtime (through a gateway) shows where it arrived.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from protocols.aun import AIDMention, AUNMessage, ToolCallPayload, ToolResultPayload

from ..storage._archive import Archive, ArchiveRecord, RecordKind

__all__ = [
    "ArchiveCounts",
    "ArchiveRoles",
    "answered",
    "archive_counts",
    "counts_as_reply",
    "message_line",
    "render_transcript",
    "snip",
]

_SNIPPET = 80
_INDENT = "    "


def answered(message: AUNMessage) -> str | None:
    """The id of the message `message` answers: the one it names, else, when it was sent while its
    sender handled a thread (a follow-up that names nothing), that thread's first message."""
    if message.in_reply_to is not None:
        return message.in_reply_to
    if message.hops and message.thread and message.thread != message.message_id:
        return message.thread
    return None


def counts_as_reply(message: AUNMessage) -> bool:
    """Whether `message`, answering another, counts among its replies: tool annotations do not."""
    return not message.is_annotation


class ArchiveRoles:
    """Who is an agent, as the archive's agents table says (`role` `agent`); an application's inbox,
    or an AID this archive never registered (one from another runtime), is not. It reads the table
    again when asked about an AID it has not seen, so registrations made since are known."""

    def __init__(self, *archives: Archive) -> None:
        self._archives = archives
        self._roles: dict[str, str] = {}

    def __call__(self, aid: str) -> bool:
        if aid not in self._roles:
            for archive in self._archives:
                self._roles.update((entry.aid, entry.role) for entry in archive.agents())
            self._roles.setdefault(aid, "unknown")
        return self._roles[aid] == "agent"


@dataclass(frozen=True)
class ArchiveCounts:
    """What a transcript of the same records shows, counted.

    Attributes:
        messages: the messages listed (each once, whoever sent or received it; a message that never
            got out, its recipient unknown, included).
        delivered: deliveries (one per recipient shown a message).
        filtered: messages a channel kept from a recipient (archived).
        dead_letters: dead letters.
        loop_stops: sends the loop guard refused.
        budget_stops: sends and model calls a budget refused.
        model_anomalies: answers of a model that were not answers.
    """

    messages: int = 0
    delivered: int = 0
    filtered: int = 0
    dead_letters: int = 0
    loop_stops: int = 0
    budget_stops: int = 0
    model_anomalies: int = 0


def archive_counts(records: Sequence[ArchiveRecord]) -> ArchiveCounts:
    """Count `records` as `render_transcript` shows them."""
    messages: set[str] = set()
    kinds: dict[RecordKind, int] = defaultdict(int)
    for record in records:
        kinds[record.kind] += 1
        if record.message is not None and record.kind in _LISTED:
            messages.add(record.message.message_id)
    return ArchiveCounts(
        messages=len(messages),
        delivered=kinds[RecordKind.RECEIVED],
        filtered=kinds[RecordKind.FILTERED],
        dead_letters=kinds[RecordKind.DEAD_LETTER],
        loop_stops=kinds[RecordKind.LOOP_STOP],
        budget_stops=kinds[RecordKind.BUDGET_STOP],
        model_anomalies=kinds[RecordKind.MODEL_ANOMALY],
    )


#: The records that list a message in the transcript (a dead letter lists one that never got out).
_LISTED = (RecordKind.SENT, RecordKind.RECEIVED, RecordKind.FILTERED, RecordKind.DEAD_LETTER)


def render_transcript(
    records: Sequence[ArchiveRecord], *, is_agent: Callable[[str], bool] = lambda _: True
) -> str:
    """Render archive records (oldest first) as text, replies nested under what they answer.

    Args:
        records: the archive's records, e.g. `runtime.archive.records()`.
        is_agent: tells agents from application inboxes, to mark agents' own openings as proactive.
    """
    sent: dict[str, AUNMessage] = {}
    outside: set[str] = set()  # received here, sent elsewhere: no ``sent`` record in this archive
    undelivered: set[str] = set()  # known only from a dead letter: never sent (no recipient), shown anyway
    children: dict[str | None, list[str]] = defaultdict(list)
    delivered: dict[str, list[str]] = defaultdict(list)
    filtered: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    notes: dict[str | None, list[str]] = defaultdict(list)
    for record in records:
        message = record.message
        if record.kind is RecordKind.SENT and message is not None:
            if message.message_id not in sent:  # else: already shown where it arrived (merged archives)
                children[answered(message)].append(message.message_id)
            sent[message.message_id] = message
            outside.discard(message.message_id)
            undelivered.discard(message.message_id)
        elif record.kind is RecordKind.RECEIVED and message is not None:
            _arrived(message, sent, outside, children)
            delivered[message.message_id].append(record.owner)
        elif record.kind is RecordKind.FILTERED and message is not None:
            _arrived(message, sent, outside, children)
            filtered[message.message_id][record.reason or "filtered"].append(record.owner)
        elif record.kind is RecordKind.THOUGHT:
            notes[record.about].append(f"({record.owner} thinks: {snip(record.text)})")
        elif record.kind is RecordKind.DEAD_LETTER:
            where = message.message_id if message is not None else None
            if message is not None and message.message_id not in sent:
                # A reply whose recipient does not exist is never sent: it is shown among the
                # replies of what it answers, marked, so the dead letters seen match those counted.
                _arrived(message, sent, undelivered, children)
            notes[where].append(f"!! DEAD LETTER at {record.owner}: {record.reason}")
        elif record.kind is RecordKind.LOOP_STOP:
            where = answered(message) if message is not None else None
            notes[where].append(f"!! LOOP GUARD stopped {record.owner}: {record.reason}")
        elif record.kind is RecordKind.BUDGET_STOP:
            # A refused send carries the refused message (the owner's own): shown under what it
            # answered. A refused model call carries the message being handled: shown under it.
            if message is None:
                where = None
            elif message.from_aid == record.owner:
                where = answered(message)
            else:
                where = message.message_id
            notes[where].append(f"!! BUDGET STOP for {record.owner}: {record.reason}")
        elif record.kind is RecordKind.MODEL_ANOMALY:
            where = message.message_id if message is not None else None
            notes[where].append(f"!! MODEL ANOMALY for {record.owner}: {record.reason}")
        elif record.kind in (RecordKind.REDRIVEN, RecordKind.DROPPED):
            where = message.message_id if message is not None else None
            notes[where].append(f"-- {record.reason} of {record.owner} {record.kind.value}")
    number = {message_id: n for n, message_id in enumerate(sent, start=1)}
    lines: list[str] = []

    def render(message_id: str, depth: int) -> None:
        message = sent[message_id]
        pad = _INDENT * depth
        tags = []
        if message_id in outside:
            tags.append("from outside")
        if message_id in undelivered:
            tags.append("dead letter")
        mentioned = [m.aid if isinstance(m, AIDMention) else "all" for m in message.mentions]
        after = ["@" + ", @".join(mentioned)] if mentioned else []
        lines.append(pad + message_line(message, number, is_agent, tags, after))
        fate = []
        if delivered.get(message_id):
            fate.append("delivered to " + ", ".join(delivered[message_id]))
        for reason, owners in filtered.get(message_id, {}).items():
            fate.append(f"filtered for {', '.join(owners)} ({reason}; archived)")
        replies = children.get(message_id, [])
        count = sum(1 for child in replies if counts_as_reply(sent[child]))
        fate.append(f"{count} repl{'y' if count == 1 else 'ies'}" if count else "no reply")
        lines.append(f"{pad}{_INDENT}{' · '.join(fate)}")
        for note in notes.get(message_id, []):
            lines.append(f"{pad}{_INDENT}{note}")
        for child in replies:
            render(child, depth + 1)

    for note in notes.get(None, []):
        lines.append(note)
    roots = [m for m in sent if answered(sent[m]) not in sent]
    for root in roots:
        render(root, 0)
    return "\n".join(lines)


def message_line(
    message: AUNMessage,
    numbers: Mapping[str, int],
    is_agent: Callable[[str], bool],
    tags: list[str],
    after: Sequence[str] = (),
) -> str:
    """`#n sender -> target [tags]: content`: `tags`, then what the message answers (or that it
    answers nothing), then `after`. `numbers` numbers the messages shown, this one included."""
    target = f"#{message.group_id}" if message.group_id else message.to
    answers = answered(message)
    if answers is None:
        # A note on the sender's own tool use starts no conversation: it is only labelled if it answers.
        if not message.is_annotation:
            tags.append("proactive" if is_agent(message.from_aid) else "new conversation")
    elif answers in numbers:
        tags.append(f"re #{numbers[answers]}")
    tags.extend(after)
    return f"#{numbers[message.message_id]} {message.from_aid} -> {target} [{'; '.join(tags)}]: {_content(message)}"


def _arrived(
    message: AUNMessage, shown: dict[str, AUNMessage], outside: set[str], children: dict[str | None, list[str]]
) -> None:
    """A message received here that was sent elsewhere is shown where it first arrived."""
    if message.message_id not in shown:
        shown[message.message_id] = message
        outside.add(message.message_id)
        children[answered(message)].append(message.message_id)


def _content(message: AUNMessage) -> str:
    payload = message.payload
    if message.text is not None:
        return snip(message.text)
    # A tool annotation shows what was used and what came of it: that is what it is for.
    if isinstance(payload, ToolCallPayload):
        arguments = ", ".join(f"{k}={v!r}" for k, v in payload.arguments.items())
        return f"<tool_call {_flat(f'{payload.name}({arguments})')}>"
    if isinstance(payload, ToolResultPayload):
        outcome = payload.result if payload.ok else f"error: {payload.error}"
        return f"<tool_result {_flat(str(outcome))}>"
    return f"<{payload.type}>"


def _flat(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 1] + "…"


def snip(text: str | None) -> str:
    """`text` on one line, cut to a snippet, quoted: how the transcript shows what was said."""
    return repr(_flat(text))
