"""The receiving side of a service AID's instance: claim each delivery in the shared ledger, then hand it on.

A plain AID's streams are kept in order by the receiving worker alone (`._inbound`). An
instance of a service AID sees only part of a stream (round robin), or a stream that another
instance handled until it died (failover), so it asks the shared ledger (`._service_store`)
before each handling. What arrives in one burst is claimed in one ledger transaction per sender.

With `sender_affinity` a stream is also handled in order: a delivery is claimed only when every
number before it is handled or being handled here; one that comes early (a new message that
overtook the resent ones after a failover) waits in a small buffer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocols.aun import SENDER_AFFINITY

from ._inbound import REORDER_LIMIT
from ._service_store import Claim, ServiceLedger

__all__ = ["ServiceInbound"]

logger = logging.getLogger("aun_runtime.distributed")

Spawn = Callable[[str, str, int, Any], None]
Ack = Callable[[str, str, int], None]


@dataclass
class _Stream:
    taken: set[int] = field(default_factory=set)  # claimed here and not yet marked done
    next: int = 0  # in order only: the next number to claim (0: not known yet)
    waiting: dict[int, tuple[int, Any]] = field(default_factory=dict)  # seq -> (base, event)


class ServiceInbound:
    """One service AID's deliveries at this instance.

    Args:
        aid: the service AID.
        ledger: its shared ledger.
        policy: `round_robin` or `sender_affinity`.
        spawn: hands `(origin, aid, seq, event)` to the agent.
        ack: acknowledges `(origin, aid, through)` to the sending worker.
    """

    def __init__(self, aid: str, ledger: ServiceLedger, policy: str, *, spawn: Spawn, ack: Ack) -> None:
        self.aid = aid
        self.ledger = ledger
        self.policy = policy
        self._spawn = spawn
        self._ack = ack
        self._streams: dict[str, _Stream] = {}
        self._arrived: dict[str, list[tuple[int, int, Any]]] = {}
        self._scheduled = False
        self._unmarked: list[tuple[str, int]] = []  # committed in the journal, not yet marked in the ledger
        self.duplicates = 0
        self.elsewhere = 0

    @property
    def in_order(self) -> bool:
        return self.policy == SENDER_AFFINITY

    def accept(self, origin: str, seq: int, base: int, event: Any) -> None:
        """A delivery arrived; it is claimed with the rest of this burst."""
        stream = self._streams.setdefault(origin, _Stream())
        if seq in stream.taken:
            self.duplicates += 1  # a resend of what is being handled here
            return
        self._arrived.setdefault(origin, []).append((seq, base, event))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._claim_arrived)

    def _claim_arrived(self) -> None:
        self._scheduled = False
        arrived, self._arrived = self._arrived, {}
        for origin, items in arrived.items():
            if self.in_order:
                self._claim_in_order(origin, items)
            else:
                self._claim_any(origin, items)

    def _claim_any(self, origin: str, items: list[tuple[int, int, Any]]) -> None:
        verdicts, through = self.ledger.claim(origin, [(seq, base) for seq, base, _ in items], in_order=False)
        self._apply(origin, items, verdicts, through)

    def _claim_in_order(self, origin: str, items: list[tuple[int, int, Any]]) -> None:
        stream = self._streams[origin]
        for seq, base, event in items:
            if seq not in stream.waiting and len(stream.waiting) < REORDER_LIMIT:
                stream.waiting[seq] = (base, event)
        if not stream.next:
            stream.next = self.ledger.through(origin) + 1
        top_base = max(base for base, _ in stream.waiting.values()) if stream.waiting else 0
        stream.next = max(stream.next, top_base)
        behind = [s for s in stream.waiting if s < stream.next]
        for seq in behind:
            del stream.waiting[seq]  # below the sender's base or already taken up here
        if behind:
            self.duplicates += len(behind)
            through = self.ledger.through(origin)
            if through:
                self._ack(origin, self.aid, through)  # its acknowledgement may have been lost
        run: list[tuple[int, int, Any]] = []
        while stream.next + len(run) in stream.waiting:
            seq = stream.next + len(run)
            base, event = stream.waiting[seq]
            run.append((seq, base, event))
        if not run:
            return
        verdicts, through = self.ledger.claim(origin, [(seq, base) for seq, base, _ in run], in_order=True)
        for (seq, _, _), verdict in zip(run, verdicts, strict=True):
            if verdict is Claim.ELSEWHERE:
                break  # a live instance has it; what follows waits for it
            del stream.waiting[seq]
            stream.next = seq + 1
        self._apply(origin, run, verdicts, through)

    def _apply(self, origin: str, items: list[tuple[int, int, Any]], verdicts: list[Claim], through: int) -> None:
        stream = self._streams[origin]
        done = False
        for (seq, _, event), verdict in zip(items, verdicts, strict=True):
            if verdict is Claim.WON and seq in stream.taken:
                self.duplicates += 1  # the same delivery twice in one burst (a resend beside it)
            elif verdict is Claim.WON:
                stream.taken.add(seq)
                self._spawn(origin, self.aid, seq, event)
            elif verdict is Claim.DONE:
                self.duplicates += 1
                done = True
            else:
                self.elsewhere += 1
        if done and through:
            self._ack(origin, self.aid, through)  # its acknowledgement may have been lost

    def committed(self, handled: list[tuple[str, int]]) -> None:
        """The journal committed these handlings: mark them done and acknowledge the new positions."""
        self._unmarked.extend(handled)
        self.mark()

    def mark(self) -> None:
        """Mark what the journal committed (again, if the ledger was busy last time)."""
        if not self._unmarked:
            return
        items, self._unmarked = self._unmarked, []
        try:
            positions = self.ledger.done(items)
        except Exception as exc:  # a ledger kept busy too long: the next commit or tick tries again
            self._unmarked[:0] = items
            logger.warning("service %s: could not mark %d handlings in the ledger yet: %s", self.aid, len(items), exc)
            return
        for origin, seq in items:
            stream = self._streams.get(origin)
            if stream is not None:
                stream.taken.discard(seq)
        for origin, through in positions.items():
            if through:
                self._ack(origin, self.aid, through)

    def abandoned(self, origin: str, seq: int) -> None:
        """A handling was cancelled (the worker stopping): its claim is settled when the ledger closes."""
        stream = self._streams.get(origin)
        if stream is not None:
            stream.taken.discard(seq)
