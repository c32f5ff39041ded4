"""`GatherTable`: results arriving one message at a time, collected until a set is complete.

Scatter/gather without RPC: nobody awaits a future per worker; results arrive as messages on the
gatherer's inbox topic and are matched to their task by key. The table bounds how many gathers may be
open at once, because a worker that never answers would otherwise leave an entry behind forever.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["MAX_OPEN_GATHERS", "GatherTable", "OpenGather"]

#: Gathers one agent keeps open at once. Past it the oldest is dropped (and reported by the caller):
#: a gatherer is for bursts of tasks, not for an unbounded backlog of unanswered ones.
MAX_OPEN_GATHERS = 1_000

ResultT = TypeVar("ResultT")


@dataclass
class OpenGather(Generic[ResultT]):
    """One gather in progress."""

    requester: str
    expected: tuple[str, ...]
    results: dict[str, ResultT] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(worker in self.results for worker in self.expected)

    @property
    def missing(self) -> list[str]:
        return [worker for worker in self.expected if worker not in self.results]

    def in_order(self) -> list[ResultT]:
        """Results in the order the workers were listed: the same every run, whoever was fastest."""
        return [self.results[worker] for worker in self.expected if worker in self.results]


class GatherTable(Generic[ResultT]):
    """Open gathers by key."""

    def __init__(self, capacity: int = MAX_OPEN_GATHERS) -> None:
        self.capacity = capacity
        self._open: dict[Hashable, OpenGather[ResultT]] = {}

    def open(self, key: Hashable, requester: str, expected: Iterable[str]) -> OpenGather[ResultT] | None:
        """Start gathering; returns the gather it had to drop to make room, if any."""
        dropped = None
        if key not in self._open and len(self._open) >= self.capacity:
            oldest = next(iter(self._open))
            dropped = self._open.pop(oldest)
        self._open[key] = OpenGather(requester, tuple(expected))
        return dropped

    def add(self, key: Hashable, worker: str, result: ResultT) -> OpenGather[ResultT] | None:
        """Add a result; returns the gather (and forgets it) once it is complete."""
        gather = self._open.get(key)
        if gather is None or worker not in gather.expected:
            return None
        gather.results[worker] = result
        if gather.complete:
            del self._open[key]
            return gather
        return None

    def reopen(self, key: Hashable, gather: OpenGather[ResultT]) -> None:
        """Keep gathering `gather` under `key` again (its completion could not be acted on)."""
        self._open[key] = gather

    def close(self, key: Hashable) -> OpenGather[ResultT] | None:
        """Stop gathering (a deadline passed); returns what was gathered so far."""
        return self._open.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._open
