"""`DurationHistogram`: counts of durations in fixed buckets, for `/metrics` to read at scrape time.

Observing is a bisection and two additions: cheap enough for every turn and every model call,
and nothing is observed unless the process serves its metrics (see `aun_runtime.operating._metrics`).
"""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["MODEL_CALL_BUCKETS", "TURN_BUCKETS", "DurationHistogram"]

#: Upper bounds (seconds) of the buckets of a turn: a code agent's turn takes milliseconds, a model
#: agent's seconds to minutes (its handler timeout is five minutes by default).
TURN_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Upper bounds (seconds) of the buckets of one model call (a model client's timeout is two minutes by default).
MODEL_CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)


class DurationHistogram:
    """How many durations fell at or under each bound, their sum and their count."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: over the largest bound
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """The buckets as Prometheus names them: `(le, count at or under it)`, `+Inf` last."""
        total = 0
        buckets: list[tuple[str, int]] = []
        for bound, count in zip((*map(repr, self.bounds), "+Inf"), self.counts, strict=True):
            total += count
            buckets.append((bound, total))
        return buckets
