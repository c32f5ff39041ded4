"""The receiving side: deliver each stream once and in order, and acknowledge what is committed.

A stream is what one sending worker sends to one AID, numbered 1, 2, 3... A delivery is handed to
the agent only when it is the next one; one that arrives early waits in a small reorder buffer, one
that was handled already is skipped (and acknowledged again, since its acknowledgement may have
been lost). The position "handled through N" is journaled with the handling itself (see
`._journal`), so it survives a crash exactly as far as the handling does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ._journal import JournalArchive
from ._outbox import DEFAULT_WINDOW

__all__ = ["REORDER_LIMIT", "Inbound"]

logger = logging.getLogger("aun_runtime.distributed")

#: Deliveries that may wait for an earlier one, per stream. A sender has at most its window on the
#: wire, so this is never reached by a well-behaved sender; past it, a delivery is dropped and the
#: sender's retry brings it again.
REORDER_LIMIT = 2 * DEFAULT_WINDOW


@dataclass
class _InStream:
    handled: int  # committed: handled through this number
    dispatched: int  # handed to the agent (handled, or being handled)
    sealed: int  # handled through this number without a gap (committed or about to be)
    early: dict[int, Any] = field(default_factory=dict)


class Inbound:
    """Per (sending worker, AID) stream positions."""

    def __init__(self, journal: JournalArchive) -> None:
        self._streams: dict[tuple[str, str], _InStream] = {
            key: _InStream(through, through, through) for key, through in journal.load_in_streams().items()
        }
        self.duplicates = 0
        self.reordered = 0
        self.dropped = 0

    def accept(self, origin: str, aid: str, seq: int, base: int, item: Any) -> tuple[list[tuple[int, Any]], bool]:
        """Take delivery `seq`; return what to hand to the agent now, in order, and whether to re-ack."""
        key = (origin, aid)
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _InStream(0, 0, 0)
        if base - 1 > stream.dispatched and not stream.early:
            # Everything below base was handled by an earlier holder of this AID.
            logger.info("stream %s -> %s starts at %d: what came before was handled elsewhere", origin, aid, base)
            stream.dispatched = stream.handled = stream.sealed = base - 1
        expected = stream.dispatched + 1
        if seq < expected:
            self.duplicates += 1
            return [], seq <= stream.handled
        if seq > expected:
            if len(stream.early) >= REORDER_LIMIT:
                self.dropped += 1
            else:
                self.reordered += 1
                stream.early[seq] = item
            return [], False
        ready = [(seq, item)]
        stream.dispatched = seq
        while stream.early:
            nxt = stream.early.pop(stream.dispatched + 1, None)
            if nxt is None:
                break
            stream.dispatched += 1
            ready.append((stream.dispatched, nxt))
        return ready, False

    def sealed(self, origin: str, aid: str, seq: int) -> int | None:
        """Delivery `seq` is finished: the stream's new gap-free position, or None if it cannot move.

        Deliveries of one stream finish in order (one agent, one mailbox); one that was abandoned
        (the worker stopping under it) leaves a gap that nothing after it may jump.
        """
        stream = self._streams[(origin, aid)]
        if seq != stream.sealed + 1:
            logger.warning("stream %s -> %s: %d finished after a gap at %d; not acknowledged", origin, aid, seq, stream.sealed + 1)
            return None
        stream.sealed = seq
        return seq

    def committed(self, handled: dict[tuple[str, str], int]) -> dict[str, dict[str, int]]:
        """Positions now durable; returns the acknowledgements to send, per origin worker."""
        acks: dict[str, dict[str, int]] = {}
        for (origin, aid), through in handled.items():
            stream = self._streams.get((origin, aid))
            if stream is not None and through > stream.handled:
                stream.handled = through
            acks.setdefault(origin, {})[aid] = through
        return acks

    def position(self, origin: str, aid: str) -> int:
        stream = self._streams.get((origin, aid))
        return stream.handled if stream is not None else 0
