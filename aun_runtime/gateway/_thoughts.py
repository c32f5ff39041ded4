"""Thoughts in memory: the bounded store behind `message.thought.*` (`._thought_methods`)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

__all__ = ["CONTEXT_TYPE", "MAX_THOUGHTS_PER_AID", "MAX_THOUGHTS_TOTAL", "MAX_THOUGHT_BYTES", "ThoughtStore"]

#: The largest envelope one thought may carry (its JSON, UTF-8). A thought is a line or a paragraph
#: of reasoning; 64 KiB of ciphertext holds some 40,000 characters of it, and 256 of them per AID
#: stay at 16 MiB, so one sender cannot fill the memory with a few huge ones.
MAX_THOUGHT_BYTES = 64 * 1024
#: Thoughts kept per sending AID; past it, that sender's oldest is dropped. A thought is read right
#: after the message it concerns, so the last few hundred conversations of one agent are enough.
MAX_THOUGHTS_PER_AID = 256
#: Thoughts kept in all; past it, the oldest of anyone's is dropped. At most 64 KiB each, this
#: caps thoughts at 256 MiB however many AIDs put them (usually far less: thoughts are short).
MAX_THOUGHTS_TOTAL = 4096

#: The one ``context.type`` accepted: a thought is about a message, named by its id.
CONTEXT_TYPE = "message"

_Key = tuple[str, str, str]  # (sender, recipient, message_id)


@dataclass(frozen=True, slots=True)
class StoredThought:
    key: _Key
    item: dict[str, Any]  #: as ``message.thought.get`` answers it


class ThoughtStore:
    """Thoughts in memory, oldest dropped first, per sender and in all.

    Args:
        per_aid: thoughts kept per sending AID.
        total: thoughts kept in all.
    """

    def __init__(self, per_aid: int = MAX_THOUGHTS_PER_AID, total: int = MAX_THOUGHTS_TOTAL) -> None:
        self.per_aid = per_aid
        self.total = total
        self._next = 0
        self._all: OrderedDict[int, StoredThought] = OrderedDict()
        self._of_sender: dict[str, OrderedDict[int, None]] = {}
        self._by_key: dict[_Key, OrderedDict[int, None]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def put(self, sender: str, to: str, message_id: str, item: dict[str, Any]) -> None:
        """Keep `item` (dropping the oldest past a bound)."""
        number, self._next = self._next, self._next + 1
        key = (sender, to, message_id)
        self._all[number] = StoredThought(key, item)
        self._of_sender.setdefault(sender, OrderedDict())[number] = None
        self._by_key.setdefault(key, OrderedDict())[number] = None
        own = self._of_sender[sender]
        if len(own) > self.per_aid:
            self._drop(next(iter(own)))
        if len(self._all) > self.total:
            self._drop(next(iter(self._all)))

    def get(self, sender: str, to: str, message_id: str) -> list[dict[str, Any]]:
        """What `sender` thought about `message_id` for `to`, oldest first."""
        return [self._all[number].item for number in self._by_key.get((sender, to, message_id), ())]

    def items(self) -> list[dict[str, Any]]:
        """Every thought kept, oldest first (what the gateway holds, for inspection)."""
        return [stored.item for stored in self._all.values()]

    def _drop(self, number: int) -> None:
        stored = self._all.pop(number)
        sender = stored.key[0]
        del self._of_sender[sender][number]
        if not self._of_sender[sender]:
            del self._of_sender[sender]
        del self._by_key[stored.key][number]
        if not self._by_key[stored.key]:
            del self._by_key[stored.key]
