"""Direct messages that come faster than they are handled, taken by the AUN client in pages.

The client delivers a direct message that comes inside its push (`event/message.received` with the
message inline) as a page of its own: the handler, then the delivery cursor, then a signed
acknowledgement (`message.v2.ack`) and its answer, one message after another under one lock per
sender. A push without the message inline is a hint: the client pulls from that sender what it
has not yet seen (`message.v2.pull`) and hands all of it over as one page, with one cursor and one
acknowledgement for the lot.

`PushPages` makes a push a hint while an earlier push of the same sender has not yet been handed
over to the link. A sender that sends faster than its messages are handled is then taken a page at
a time, and one whose messages are handled before the next comes still has each delivered with its
push, without the pull's round trip. What is delivered, in what order, and when it is acknowledged
stays the client's own business (its pull, the coverage proof it checks, its cursor and ack); this
changes only which of its two ways a message comes by. A message the network keeps only to push
(`storage: volatile`) keeps its inline copy, since a pull would not find it, and so does a push
that carries the message in any other field the client reads. So do the pushes of a sender none of
whose messages has reached the link yet: the client learns of a new sender from its first message
and would only note a hint from one it does not know. A sender whose page never came (the client
found the message already seen, say) counts as handled again once its latest push is `STALE_AFTER`
seconds old.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["PUSH_METHOD", "SENDERS_KEPT", "STALE_AFTER", "PushPages"]

#: The push that may carry a direct message inline.
PUSH_METHOD = "event/message.received"
#: Seconds after which a push not yet handed over no longer makes the next one a hint.
STALE_AFTER = 1.0
#: Senders remembered, each way (pushed and not yet handed over; handed over before): past it the
#: longest-remembered is forgotten, which only means its next push comes with its message.
SENDERS_KEPT = 4096
#: Fields of a push the client also takes a message from (older pushes carry it there).
_MESSAGE_FIELDS = ("payload", "envelope_json", "legacy_v1")


class PushPages:
    """Which senders have a pushed message still on its way to the link.

    Each of its two records keeps at most `SENDERS_KEPT` senders.
    """

    def __init__(self, stale_after: float = STALE_AFTER) -> None:
        self._stale_after = stale_after
        self._waiting: dict[str, tuple[int, float]] = {}  # sender -> (highest seq pushed, when)
        self._known: dict[str, None] = {}  # senders with a page handed over, oldest first
        self.hints = 0  #: pushes made hints

    def sift(self, frame: dict[str, Any]) -> None:
        """Look at one frame from the network, as decoded; a push of a sender whose earlier push
        is still on its way loses its inline message (changed in place)."""
        if frame.get("method") != PUSH_METHOD:
            return
        push = frame.get("params")
        if not isinstance(push, dict):
            return
        inline = push.get("inline_message")
        sender = push.get("sender_aid") or push.get("from_aid") or push.get("from")
        seq = push.get("seq")
        if not isinstance(inline, dict) or not isinstance(sender, str) or type(seq) is not int or seq <= 0:
            return
        if _volatile(push) or _volatile(inline) or any(name in push for name in _MESSAGE_FIELDS):
            return
        now = time.monotonic()
        before = self._waiting.get(sender)
        _remember(self._waiting, sender, (max(seq, before[0]) if before else seq, now))
        if before is not None and now - before[1] < self._stale_after and sender in self._known:
            del push["inline_message"]
            self.hints += 1

    def handed_over(self, sender: str, seq: int) -> None:
        """The link has taken `sender`'s messages up to `seq`."""
        if sender not in self._known:
            _remember(self._known, sender, None)
        waiting = self._waiting.get(sender)
        if waiting is not None and waiting[0] <= seq:
            del self._waiting[sender]


def _remember(record: dict[str, Any], sender: str, value: Any) -> None:
    if sender not in record and len(record) >= SENDERS_KEPT:
        del record[next(iter(record))]
    record[sender] = value


def _volatile(message: dict[str, Any]) -> bool:
    return message.get("storage") == "volatile" or message.get("volatile_has_more") is True
