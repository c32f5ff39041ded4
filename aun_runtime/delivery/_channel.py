"""The channel: what stands between delivery and an agent's handler.

For each arriving message the channel of the receiving agent decides, before any model sees it:

1. **Duplicate?** A second delivery of the same `(from_aid, message_id)` is dropped (it was already
   archived and handled once). This is what turns at-least-once transport into exactly-once handling.
2. **Shown?** A group message in a `mention` group reaches the handler only if its structured
   mentions name this agent or everyone. The mode is the one snapshotted onto the message at send
   time, so a mode change is never retroactive and every process decides alike. Text is never
   scanned for `@name`.
3. **Archived, always.** Shown messages are archived as `received`, shielded ones as `filtered`
   with the reason: not delivered to the model, which is not the same as read and ignored.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from enum import Enum

from protocols.aun import AUNMessage, DispatchMode

from ..storage._archive import Archive, RecordKind

__all__ = ["DEFAULT_DEDUP_WINDOW", "Admission", "Channel"]

#: How many recent (sender, message_id) pairs each agent remembers to recognise redeliveries. A
#: redelivery comes within seconds to minutes of the original (a reconnect, a retried send), so
#: this many messages per agent covers any realistic window at about 150 bytes each.
DEFAULT_DEDUP_WINDOW = 4096

NOT_MENTIONED = "mention mode: not mentioned"
_MENTION = DispatchMode.MENTION


class Admission(Enum):
    """The channel's verdict on one message."""

    DELIVER = "deliver"
    FILTERED = "filtered"
    DUPLICATE = "duplicate"


class Channel:
    """Dedup, dispatch-mode filter and archive for one agent.

    Args:
        aid: the agent this channel belongs to.
        archive: where every message is recorded.
        dedup_window: how many recent message keys to remember.
        seed: the keys to start from; default: the newest ones in the archive (a restart).
    """

    __slots__ = ("_archive", "_order", "_seen", "aid", "dedup_window")

    def __init__(
        self,
        aid: str,
        archive: Archive,
        dedup_window: int = DEFAULT_DEDUP_WINDOW,
        *,
        seed: Iterable[tuple[str, str]] | None = None,
    ) -> None:
        self.aid = aid
        self.dedup_window = dedup_window
        self._archive = archive
        # A set to ask and a ring of the same keys in arrival order, oldest first, to evict from:
        # two C operations per message, cheaper than an ordered dict's linked entries.
        # A key twice in the seed is kept once, or its eviction would leave the later one unasked.
        keys = dict.fromkeys(archive.seen_keys(aid, dedup_window) if seed is None else seed)
        self._order: deque[tuple[str, str]] = deque(keys, maxlen=dedup_window)
        self._seen: set[tuple[str, str]] = set(self._order)

    def keys(self) -> tuple[tuple[str, str], ...]:
        """The remembered (sender, message_id) keys, oldest first."""
        return tuple(self._order)

    def forget(self, key: tuple[str, str]) -> None:
        """Take `(sender, message_id)` out of the window: the message is to be delivered again on
        purpose (a dead letter redriven), and must not be taken for a redelivery."""
        if key in self._seen:
            self._seen.discard(key)
            self._order.remove(key)

    def admit(self, message: AUNMessage) -> Admission:
        """Decide what happens to `message` and archive it (once)."""
        key = (message.from_aid, message.message_id)
        seen = self._seen
        if key in seen:
            return Admission.DUPLICATE
        order = self._order
        if len(order) == self.dedup_window:
            seen.discard(order[0])  # the oldest key leaves the window (the ring drops it on append)
        order.append(key)
        seen.add(key)
        if (
            message.dispatch_mode is _MENTION
            and message.group_id is not None
            and not message.mentions_aid(self.aid)
        ):
            self._archive.record(self.aid, RecordKind.FILTERED, message, NOT_MENTIONED)
            return Admission.FILTERED
        self._archive.record(self.aid, RecordKind.RECEIVED, message)
        return Admission.DELIVER
