"""Waiting for a database that is not up yet, as a command started beside it must.

Under compose or Kubernetes a worker, or `run`, often starts before its PostgreSQL server accepts
connections. Rather than fail at once (and crash-loop), the command tries again every
`RETRY_INTERVAL` seconds up to its connect timeout, saying once why it waits; meanwhile its
`/readyz` answers 503 with what it waits for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from ..base._errors import DatabaseUnreachableError

__all__ = ["RETRY_INTERVAL", "open_when_available"]

T = TypeVar("T")

logger = logging.getLogger("aun_runtime")

#: Seconds between two attempts to reach a database that did not answer.
RETRY_INTERVAL = 1.0


async def open_when_available(
    open_storage: Callable[[], T], timeout: float | None, waiting: Callable[[str | None], None]
) -> T:
    """`open_storage()`, tried again while its database is unavailable, for `timeout` seconds at
    most (None: for ever); `waiting(reason)` is told why it waits (None once it is open).

    Raises:
        DatabaseUnreachableError: still unreachable after `timeout` seconds (the last error).
        StorageUnavailableError: a database that refuses the setting (not worth waiting for).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    said = False
    while True:
        try:
            opened = open_storage()
        except DatabaseUnreachableError as exc:  # a wrong password or database name is no reason to wait
            if deadline is not None and time.monotonic() + RETRY_INTERVAL > deadline:
                raise
            waiting(f"waiting for the database: {exc}")
            if not said:
                logger.warning("waiting up to %s for the database: %s",
                               "ever" if deadline is None else f"{timeout:g} s", exc)
                said = True
            await asyncio.sleep(RETRY_INTERVAL)
            continue
        waiting(None)
        return opened
