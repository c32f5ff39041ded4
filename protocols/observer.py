"""The group-chat observer protocol: when an agent in a group speaks, and when it stays silent.

Two layers share the work. The **code** decides what reaches the model (not the agent's own messages,
not senders outside an allow-list, and in a `mention` group only what names the agent) and carries
out the model's decision. The **model** reads each message with the session's context and decides:
it answers `__SILENT__` to stay out, or `__REPLY__` followed by what to say. Output without a
marker is sent as it is.

Models do not always write the marker the way they were told, so reading it is forgiving and leaking
it is impossible:

* whitespace, markdown wrappers (backticks, asterisks, quotes, brackets, a code fence) and escaped
  underscores (`\\_\\_SILENT\\_\\_`) around a leading marker are recognised, in any letter case;
* a `__SILENT__` anywhere in the output means silence (when the model is of two minds, it stays out);
* `__REPLY__` markers are removed wherever they are;
* an output that is empty once the markers are gone is silence: there is nothing to send;
* a streamed output is read with `ObserverStreamParser`, which holds back anything that could
  still turn out to be part of a marker split across chunks.

Everything here is pure: no I/O, no runtime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "OBSERVER_PROMPT",
    "REPLY_MARKER",
    "SILENT_MARKER",
    "ObserverDecision",
    "ObserverOutput",
    "ObserverStreamParser",
    "observer_system_prompt",
    "parse_observer_output",
]

SILENT_MARKER = "__SILENT__"
REPLY_MARKER = "__REPLY__"

#: The observer protocol, as the model reads it. ``{aid}`` and ``{persona}`` are filled in.
OBSERVER_PROMPT = """\
You are {aid}, a member of a group chat.{persona}

You are shown every message posted in the group, whether or not it names you, together with the \
recent conversation. For each new message, decide whether you should say something:

- The topic has nothing to do with you or your role: stay silent.
- It carries on a conversation you are taking part in: reply.
- It names you, or asks you something directly: reply.
- Someone has just made the point you would make: stay silent, unless you are asked.
- You are not sure whether to speak: stay silent. Saying nothing beats adding noise.

How to answer:
- To stay silent, write __SILENT__ and nothing else (a short reason may follow it; nobody sees it).
- To speak, write __REPLY__ followed by your message.
- The marker comes first, as plain text: no quotes, backticks, asterisks or brackets around it.
- Write for the group: plain text, brief, and do not repeat what others have already said."""


def observer_system_prompt(aid: str, persona: str = "") -> str:
    """The observer prompt for `aid`, with an optional persona (who it is, what it knows)."""
    return OBSERVER_PROMPT.format(aid=aid, persona=f" {persona.strip()}" if persona.strip() else "")


class ObserverDecision(StrEnum):
    """What the model decided."""

    SILENT = "silent"
    REPLY = "reply"


@dataclass(frozen=True)
class ObserverOutput:
    """A model output, read.

    Attributes:
        decision: silent or reply.
        text: what to send (empty when silent), markers removed.
        marker: the leading marker found (`__SILENT__`/`__REPLY__`), or None for unmarked output.
        note: for silence, whatever the model wrote besides the marker (its reason), for the archive.
    """

    decision: ObserverDecision
    text: str
    marker: str | None
    note: str = ""


# Characters a model wraps a marker in: markdown emphasis and code, quotes, brackets.
_WRAP = r"[\s*`\"'“”‘’\[\](){}<>~:|-]"
_FENCE = r"```[\w+-]*"
_MARKER = r"_{2}\s*(?P<name>SILENT|REPLY)\s*_{2}"
# After a marker, only closing wrappers: "(see above)" or "- a list" after __REPLY__ is the message.
_CLOSE = r"[\s*`\"'”’\])}>:~|]"
_LEADING = re.compile(rf"^(?:{_WRAP}|{_FENCE})*{_MARKER}{_CLOSE}*", re.IGNORECASE)
_ANY_SILENT = re.compile(r"_{2}\s*SILENT\s*_{2}", re.IGNORECASE)
_ANY_REPLY = re.compile(r"[ \t]*[*`\"'\[(<]*_{2}\s*REPLY\s*_{2}[*`\"'\])>:]*[ \t]*", re.IGNORECASE)
# An output that is nothing but a mangled marker ("SILENT", "__SILENT", "[silent]").
_BARE_SILENT = re.compile(rf"^(?:{_WRAP}|_)*SILENT(?:{_WRAP}|_)*$", re.IGNORECASE)


def _unescape(text: str) -> str:
    # Markdown-minded models escape underscores: \_\_SILENT\_\_.
    return text.replace("\\_", "_")


def parse_observer_output(raw: str) -> ObserverOutput:
    """Read a complete model output.

    Example:
        >>> parse_observer_output("  **__SILENT__** off topic").decision
        <ObserverDecision.SILENT: 'silent'>
        >>> parse_observer_output("__REPLY__ Friday works for me.").text
        'Friday works for me.'
    """
    text = _unescape(raw)
    marker: str | None = None
    body = text
    leading = _LEADING.match(text)
    if leading is not None:
        marker = f"__{leading.group('name').upper()}__"
        body = text[leading.end() :]
        if marker == SILENT_MARKER:
            return ObserverOutput(ObserverDecision.SILENT, "", marker, body.strip())
    if _ANY_SILENT.search(body) or _BARE_SILENT.match(body):
        # Of two minds, or a marker mangled beyond the forgiving match: silence is the safe reading.
        note = _ANY_SILENT.sub("", body).strip()
        return ObserverOutput(ObserverDecision.SILENT, "", marker or SILENT_MARKER, note)
    body = _ANY_REPLY.sub(" ", body).strip()
    if not body:
        return ObserverOutput(ObserverDecision.SILENT, "", marker, "empty output")
    return ObserverOutput(ObserverDecision.REPLY, body, marker)


#: Characters held back from display while streaming: enough to cover a marker with its wrappers
#: split across chunks, so that no part of one is ever shown.
STREAM_HOLD_BACK = 24


class ObserverStreamParser:
    """Reads a streamed model output chunk by chunk.

    `feed` returns the text that is safe to show so far (never any part of a marker);
    `decision` is known as early as possible, so a caller can stop a silent stream at once;
    `finish` gives the same `ObserverOutput` as `parse_observer_output` on the
    whole text.

    Example:
        >>> parser = ObserverStreamParser()
        >>> parser.feed("__SIL"), parser.decision
        ('', None)
        >>> parser.feed("ENT__ not for me"), parser.decision
        ('', <ObserverDecision.SILENT: 'silent'>)
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._shown = ""
        self.decision: ObserverDecision | None = None

    def feed(self, chunk: str) -> str:
        """Add a chunk; return the newly showable text (possibly empty)."""
        self._buffer += chunk
        if self.decision is ObserverDecision.SILENT:
            return ""
        text = _unescape(self._buffer)
        if _ANY_SILENT.search(text):
            self.decision = ObserverDecision.SILENT
            return ""
        if self.decision is None:
            self.decision = _leading_decision(text)
            if self.decision is None:
                return ""
        body = parse_observer_output(self._buffer).text if self.decision is ObserverDecision.REPLY else ""
        safe = body[: max(0, len(body) - STREAM_HOLD_BACK)]
        if not safe.startswith(self._shown):
            return ""  # a marker was removed inside what is held back; show the rest at the end
        new, self._shown = safe[len(self._shown) :], safe
        return new

    def finish(self) -> ObserverOutput:
        """The whole output, read (the final word on the decision and the text)."""
        output = parse_observer_output(self._buffer)
        self.decision = output.decision
        return output

    @property
    def shown(self) -> str:
        """Everything `feed` has returned so far."""
        return self._shown


def _leading_decision(text: str) -> ObserverDecision | None:
    """Decide from the start of an unfinished output, or None while it could still be a marker."""
    leading = _LEADING.match(text)
    if leading is not None:
        name = leading.group("name").upper()
        if name == "SILENT":
            return ObserverDecision.SILENT
        # Wait for a character past the marker's closing wrappers before deciding what the body is.
        return ObserverDecision.REPLY if leading.end() < len(text) else None
    start = re.match(rf"^(?:{_WRAP}|{_FENCE}|`)*", text)
    rest = text[start.end() if start else 0 :]
    if not rest:
        return None
    squeezed = re.sub(r"\s", "", rest).upper()
    for marker in (SILENT_MARKER, REPLY_MARKER):
        if marker.startswith(squeezed[: len(marker)]) and len(squeezed) <= len(marker):
            return None  # still a possible marker
    return ObserverDecision.REPLY
