"""How the limiter reads a server's wish to be left alone, and how it spaces calls after failures."""

from __future__ import annotations

import asyncio

import pytest

from aun_runtime.models import EndpointLimiter, limiter_for
from aun_runtime.models._limiter import JITTER, retry_after_of


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the finer one wins
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"}, 360.0),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms",
          "x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s"}, 0.02),
        ({"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "1s"}, None),  # not spent
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # a date: model APIs send seconds
        ({}, None),
    ],
)
def test_retry_after_is_read_from_the_headers_servers_send(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_of(headers) == seconds


def test_only_a_spent_budget_holds_calls_after_a_success() -> None:
    assert retry_after_of({"Retry-After": "2"}, exhausted_only=True) is None
    assert retry_after_of({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1h2m3.5s"},
                          exhausted_only=True) == 3723.5


async def test_failures_back_off_exponentially_with_jitter_added_never_taken_away() -> None:
    limiter = EndpointLimiter("m at u", max_concurrent=2, backoff=0.5, max_backoff=3.0)
    waits = []
    for _ in range(5):
        assert await limiter.acquire(asyncio.get_running_loop().time() + 60)
        waits.append(limiter.release(failed=True, what="HTTP 500"))
        limiter.open_at = 0.0  # the test does not wait the backoff out
    for wait, base in zip(waits, [0.5, 1.0, 2.0, 3.0, 3.0], strict=True):
        assert base <= wait <= base * (1 + JITTER)
    assert limiter.stats.failures == 5 and limiter.last_failure == "HTTP 500"


async def test_a_waiting_call_gives_up_at_its_deadline() -> None:
    limiter = EndpointLimiter("m at u", max_concurrent=1, backoff=0.5, max_backoff=3.0)
    loop = asyncio.get_running_loop()
    assert await limiter.acquire(loop.time() + 1)
    started = loop.time()
    assert not await limiter.acquire(loop.time() + 0.2)  # the one slot is taken
    assert 0.15 <= loop.time() - started < 1.0
    limiter.release(failed=False)


async def test_one_limiter_per_endpoint_and_model_in_a_loop() -> None:
    first = limiter_for("http://h/v1/", "m", max_concurrent=1, backoff=1, max_backoff=2)
    assert limiter_for("http://h/v1", "m", max_concurrent=5, backoff=1, max_backoff=2) is first
    assert limiter_for("http://h/v1", "other", max_concurrent=1, backoff=1, max_backoff=2) is not first
