"""`EndpointLimiter`: one model endpoint, one budget of patience, shared by every agent of a process.

Twenty agents on one endpoint that each retry a 429 on their own clock hit it twenty times per
`Retry-After`, and a storm that lasts longer than their retries silences all of them. So every
client built for the same endpoint (base URL and model) in one process, in one event loop, goes
through one limiter:

* **A cap on calls in flight** (`max_concurrent`): calls past it wait for a free slot.
* **A shared gate.** A 429, a 5xx, a timeout or a dropped connection closes the gate for everyone:
  for the `Retry-After` the server gave (or `retry-after-ms`, or the `x-ratelimit-reset-*` of an
  exhausted budget), else for an exponential backoff (`backoff`, doubled per consecutive failure,
  at most `max_backoff`). A random jitter of up to a fifth is added, never taken away: no request
  leaves before a `Retry-After` it was given has passed.
* **One probe.** When the gate opens after a failure, one call goes through; the others wait for
  its outcome. A success opens the endpoint to all (within the cap); a failure closes it again.
  During a storm the endpoint therefore sees about one request per `Retry-After`, not one per agent.
* **Budgets announced before they run out.** A successful answer whose `x-ratelimit-remaining-requests`
  is 0 closes the gate until its `x-ratelimit-reset-requests`.

What it shares is one process's one event loop (a worker process has its own): agents in other
processes on the same endpoint are not counted, and each process rides the storm on its own gate.
"""

from __future__ import annotations

import asyncio
import random
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["EndpointLimiter", "LimiterStats", "limiter_for", "retry_after_of"]

#: A jitter of up to this fraction is added to every wait: agents that were told the same
#: `Retry-After` do not come back in the same millisecond.
JITTER = 0.2

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(value: str) -> float | None:
    """`2`, `1.5`, `20ms`, `6m0s`, `1h2m3.5s` as seconds (None if it is none of these)."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(number) * _UNIT[unit] for number, unit in parts)


def retry_after_of(headers: Mapping[str, str], *, exhausted_only: bool = False) -> float | None:
    """How long the server asks a client to wait, from its headers (None: it does not say).

    `retry-after-ms` and `retry-after` (seconds) first; else the `x-ratelimit-reset-*` of a budget
    whose `x-ratelimit-remaining-*` is 0 (with `exhausted_only`, only that). An HTTP date in
    `Retry-After` is not read: model APIs send seconds.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    if not exhausted_only:
        milliseconds = lowered.get("retry-after-ms")
        if milliseconds is not None and (seconds := _seconds(milliseconds)) is not None:
            return seconds / 1000
        after = lowered.get("retry-after")
        if after is not None and (seconds := _seconds(after)) is not None:
            return seconds
    waits = [
        seconds
        for budget in ("requests", "tokens")
        if lowered.get(f"x-ratelimit-remaining-{budget}", "").strip() == "0"
        and (seconds := _seconds(lowered.get(f"x-ratelimit-reset-{budget}", ""))) is not None
    ]
    return max(waits) if waits else None


@dataclass
class LimiterStats:
    """What one endpoint's limiter has seen (process-wide, across all agents)."""

    #: Requests let through to the endpoint.
    requests: int = 0
    #: Failures that closed the gate (429, 5xx, timeouts, connection errors).
    failures: int = 0
    #: Of those, answers 429.
    throttled: int = 0
    #: Calls that had to wait at the gate or for a slot.
    waits: int = 0


class EndpointLimiter:
    """The shared gate and slots of one model endpoint (see the module docstring).

    Args:
        endpoint: what it limits, for messages (`model at base URL`).
        max_concurrent: calls in flight at once.
        backoff: seconds of the first wait after a failure that gave no `Retry-After`.
        max_backoff: the longest such wait.
    """

    def __init__(self, endpoint: str, *, max_concurrent: int, backoff: float, max_backoff: float) -> None:
        self.endpoint = endpoint
        self.max_concurrent = max_concurrent
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.stats = LimiterStats()
        #: No request leaves before this loop time.
        self.open_at = 0.0
        #: Failures since the last success.
        self.failures = 0
        #: What the last failure was, for the error of a call that ran out of patience.
        self.last_failure = ""
        self._probing = False
        self._in_flight = 0
        self._changed = asyncio.Event()

    @property
    def in_flight(self) -> int:
        """Calls holding a slot now."""
        return self._in_flight

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def acquire(self, deadline: float) -> bool:
        """Wait until this call may go (a slot is free, the gate open, no probe out); False if
        that is not before `deadline` (loop time). A True must be followed by `release`."""
        loop = asyncio.get_running_loop()
        waited = False
        while True:
            now = loop.time()
            free = self._in_flight < self.max_concurrent and not self._probing
            if free and now >= self.open_at:
                break
            waited = True
            until = deadline if not free else min(deadline, self.open_at)
            if now >= deadline:
                return False
            changed = self._changed
            try:
                async with asyncio.timeout(until - now):
                    await changed.wait()
            except TimeoutError:
                pass
        if waited:
            self.stats.waits += 1
        if self.failures:
            self._probing = True  # the endpoint failed last: this call finds out whether it is back
        self._in_flight += 1
        self.stats.requests += 1
        return True

    def release(
        self, *, failed: bool, retry_after: float | None = None, what: str = "", cancelled: bool = False
    ) -> float:
        """The call that held a slot is over; a failure closes the gate, a success opens it (a
        `cancelled` call says nothing of the endpoint). Returns the wait it set."""
        self._in_flight -= 1
        self._probing = False
        wait = 0.0
        loop = asyncio.get_running_loop()
        if cancelled:
            pass  # the next waiter probes instead
        elif failed:
            self.failures += 1
            self.stats.failures += 1
            self.last_failure = what
            if retry_after is None:
                retry_after = min(self.max_backoff, self.backoff * 2 ** min(self.failures - 1, 30))
            wait = retry_after * (1 + random.uniform(0, JITTER))
            self.open_at = max(self.open_at, loop.time() + wait)
        else:
            self.failures = 0
            if retry_after is not None:  # an answer that spent the last of a budget
                wait = retry_after * (1 + random.uniform(0, JITTER))
                self.open_at = max(self.open_at, loop.time() + wait)
        self._notify()
        return wait


# One registry per event loop: the gate's event belongs to a loop, and a test or a program that
# runs several loops one after another must not share one across them.
_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], EndpointLimiter]] = (
    weakref.WeakKeyDictionary()
)


def limiter_for(
    base_url: str, model: str, *, max_concurrent: int, backoff: float, max_backoff: float
) -> EndpointLimiter:
    """The limiter of the endpoint `(base_url, model)` in the running loop (made by its first user,
    whose settings it keeps)."""
    loop = asyncio.get_running_loop()
    limiters = _LIMITERS.setdefault(loop, {})
    key = (base_url.rstrip("/"), model)
    limiter = limiters.get(key)
    if limiter is None:
        limiter = limiters[key] = EndpointLimiter(
            f"{model!r} at {key[0]}", max_concurrent=max_concurrent, backoff=backoff, max_backoff=max_backoff
        )
    return limiter
