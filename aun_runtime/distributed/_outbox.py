"""The sending side: one numbered, durable stream per recipient AID, sent until acknowledged.

Each message a worker sends to an AID gets the next number in the worker's stream to that AID and a
row in the journal's outbox. It leaves the process once that row is committed, and it stays in the
outbox until the receiving worker acknowledges it (after its own commit of the handling). So:

* a receiver that dies loses nothing: when its AID is held again, the stream is sent again from the
  first unacknowledged number, in order, and the receiver skips what it had already handled;
* a host that restarts loses nothing: after the reconnect every stream is sent again the same way;
* a message to an AID nobody holds (away, or never seen) waits in the outbox and goes out when a
  worker registers the AID.

Every message carries the stream's lowest unacknowledged number (`base`): everything below it was
handled by some holder of the AID, so a new holder with an empty journal starts there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

from ..delivery._directory import AIDStatus
from ._journal import JournalArchive
from ._wire import BASE_ATTR, SEQ_ATTR

__all__ = ["DEFAULT_OUTBOX_CAPACITY", "DEFAULT_WINDOW", "Outbox"]

logger = logging.getLogger("aun_runtime.distributed")

#: Messages sent to one AID and not yet acknowledged that may be on the wire at once. It bounds what
#: the host and the receiver queue for one stream; the rest waits in the outbox (on disk).
DEFAULT_WINDOW = 512
#: Unacknowledged messages a worker keeps in all (in memory and in its journal). Past it, a send is
#: refused with a dead letter: a receiver that stays away must not grow a sender without end.
DEFAULT_OUTBOX_CAPACITY = 100_000
#: Seconds without any acknowledgement before a stream is sent again from its base, as a last
#: resort (the usual triggers are a reconnect and the AID being held again); doubles up to 60 s.
ACK_TIMEOUT = 5.0
_MAX_ACK_TIMEOUT = 60.0
#: Seconds after an acknowledgement before its rows are deleted by a commit of their own, unless a
#: commit took them along first (in a flood, every commit does). Without it, a flood's thousands of
#: acknowledged rows were deleted by the commit of the next message, which waited 5 ms for it.
DONE_COMMIT_DELAY = 0.05

_Event = cloudevent_pb2.CloudEvent


@dataclass
class _Stream:
    aid: str
    last_seq: int = 0
    committed: int = 0  # highest number whose outbox row is durable (may be sent)
    sent: int = 0  # highest number sent since the last restart of the stream
    entries: OrderedDict[int, _Event] = field(default_factory=OrderedDict)
    waited_since: float = 0.0
    timeout: float = ACK_TIMEOUT

    @property
    def base(self) -> int:
        return next(iter(self.entries)) if self.entries else self.last_seq + 1


class Outbox:
    """Numbered, durable, acknowledged streams to recipient AIDs.

    Args:
        journal: where outbox rows are kept.
        send: puts a message on the host stream (returns False when not connected).
        status: where an AID stands (only HELD AIDs are sent to).
        window: unacknowledged messages on the wire per stream.
        capacity: unacknowledged messages kept in all.
    """

    def __init__(
        self,
        journal: JournalArchive,
        send: Callable[[agent_worker_pb2.Message], bool],
        status: Callable[[str], AIDStatus],
        *,
        window: int = DEFAULT_WINDOW,
        capacity: int = DEFAULT_OUTBOX_CAPACITY,
    ) -> None:
        self._journal = journal
        self._send = send
        self._status = status
        self.window = window
        self.capacity = capacity
        self.size = 0
        self.sent = 0
        self.resent = 0
        self.acked = 0
        self._streams: dict[str, _Stream] = {}
        self.connected = False
        self._done_timer: asyncio.TimerHandle | None = None

    def load(self) -> None:
        """Take up the streams a previous run of this worker left in the journal."""
        for aid, last in self._journal.load_out_streams().items():
            self._stream(aid).last_seq = last
        for aid, seq, data in self._journal.load_outbox():
            stream = self._stream(aid)
            event = _Event()
            event.ParseFromString(data)
            stream.entries[seq] = event
            stream.committed = max(stream.committed, seq)
            stream.last_seq = max(stream.last_seq, seq)
            self.size += 1
        if self.size:
            logger.info("outbox: %d unacknowledged messages taken up from the journal", self.size)

    def _stream(self, aid: str) -> _Stream:
        stream = self._streams.get(aid)
        if stream is None:
            stream = self._streams[aid] = _Stream(aid)
        return stream

    @property
    def full(self) -> bool:
        return self.size >= self.capacity

    def append(self, aid: str, event: _Event) -> int:
        """Number `event` in the stream to `aid` and journal it; it is sent once committed."""
        stream = self._stream(aid)
        stream.last_seq += 1
        seq = stream.last_seq
        event.attributes[SEQ_ATTR].ce_integer = seq
        stream.entries[seq] = event
        self.size += 1
        self._journal.outbox_add(aid, seq, event.SerializeToString())
        return seq

    def committed(self, rows: list[tuple[str, int]]) -> None:
        """Rows are durable: what they hold may leave now."""
        touched: set[str] = set()
        for aid, seq in rows:
            stream = self._streams[aid]
            if seq > stream.committed:
                stream.committed = seq
                touched.add(aid)
        for aid in touched:
            self.pump(aid)

    def acknowledged(self, aid: str, through: int) -> None:
        """The receiver has handled (and committed) everything up to `through`."""
        stream = self._streams.get(aid)
        if stream is None:
            return
        entries = stream.entries
        removed = 0
        while entries:
            seq = next(iter(entries))
            if seq > through:
                break
            del entries[seq]
            removed += 1
        if removed:
            self.size -= removed
            self.acked += removed
            stream.waited_since = time.monotonic()
            stream.timeout = ACK_TIMEOUT
            self._journal.outbox_done(aid, through)
            if self._done_timer is None:
                self._done_timer = asyncio.get_running_loop().call_later(DONE_COMMIT_DELAY, self._commit_done)
        if stream.sent < through:
            stream.sent = through
        self.pump(aid)

    def _commit_done(self) -> None:
        self._done_timer = None
        self._journal.request_commit()  # a no-op if a commit already took the rows along

    def pump(self, aid: str) -> None:
        """Send what the window allows to `aid`, if its AID is held and the host is there."""
        stream = self._streams.get(aid)
        if stream is None or not stream.entries or not self.connected:
            return
        if self._status(aid) is not AIDStatus.HELD:
            return
        base = stream.base
        limit = min(stream.committed, base + self.window - 1)
        seq = max(stream.sent + 1, base)
        if seq > limit:
            return
        if stream.sent < base:
            stream.waited_since = time.monotonic()
        entries = stream.entries
        while seq <= limit:
            event = entries.get(seq)
            if event is not None:
                event.attributes[BASE_ATTR].ce_integer = base
                if not self._send(agent_worker_pb2.Message(cloudEvent=event)):
                    return
                self.sent += 1
            stream.sent = seq
            seq += 1

    def restart(self, aid: str | None = None) -> None:
        """Send again from the base: after a reconnect (all streams) or when `aid` is held again."""
        streams = self._streams.values() if aid is None else [self._streams[aid]] if aid in self._streams else []
        for stream in streams:
            if stream.entries and stream.sent >= stream.base:
                self.resent += min(stream.sent, stream.committed) - stream.base + 1
            stream.sent = stream.base - 1
            self.pump(stream.aid)

    def check_timeouts(self) -> None:
        """Send again, from its base, a stream whose receiver has said nothing for too long."""
        now = time.monotonic()
        for stream in self._streams.values():
            if not stream.entries or stream.sent < stream.base or not self.connected:
                continue
            if now - stream.waited_since >= stream.timeout and self._status(stream.aid) is AIDStatus.HELD:
                logger.info("outbox: no acknowledgement from %s for %.0f s; sending again", stream.aid, stream.timeout)
                stream.timeout = min(stream.timeout * 2, _MAX_ACK_TIMEOUT)
                self.restart(stream.aid)

    def settled(self) -> bool:
        """True when nothing is waiting for an AID that is held: everything sent was handled."""
        return not any(s.entries and self._status(s.aid) is AIDStatus.HELD for s in self._streams.values())

    def kept(self) -> dict[str, int]:
        """Messages waiting for AIDs that nobody holds now, per AID."""
        return {
            s.aid: len(s.entries)
            for s in self._streams.values()
            if s.entries and self._status(s.aid) is not AIDStatus.HELD
        }
