"""`BadRequestLog`: malformed HTTP is answered 400 and summarised in the log, never a traceback.

aiohttp answers a request it cannot parse (no `Host` header, a bad request line, a bad header)
with a 400 and logs it as an error with the parser's traceback: ten lines per request, so anyone who
reaches the port can fill the log (2,000 such requests made 1.3 MB). The local gateway and the
console give aiohttp this logger instead. A malformed request is nobody's bug here: the first in a
quiet spell is logged in one line at once, those that follow are counted, and one line at the end
of each `BAD_REQUEST_LOG_INTERVAL` they kept coming in says how many there were. Every other error
aiohttp reports (a handler that raised: a bug) keeps its traceback.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["BAD_REQUEST_LOG_INTERVAL", "BadRequestLog"]

#: Seconds over which malformed requests are counted into one log line. A minute keeps a flood to
#: one line a minute, and a single stray request still shows at once.
BAD_REQUEST_LOG_INTERVAL = 60.0
#: Characters of the parser's reason kept in the line (a bad header's reason quotes the header).
_REASON_CHARS = 160


class BadRequestLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger, with malformed requests summarised.

    Args:
        logger: where the lines go (default: aiohttp's own server logger).
        interval: seconds over which malformed requests are counted into one line.
    """

    def __init__(self, logger: logging.Logger | None = None, interval: float = BAD_REQUEST_LOG_INTERVAL) -> None:
        super().__init__(logger or logging.getLogger("aiohttp.server"), {})
        self.interval = interval
        #: Malformed requests seen in all.
        self.malformed = 0
        self._counted = 0  # in the current interval, after its first
        self._last = ""
        self._flush: asyncio.TimerHandle | None = None

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if not isinstance(error, HttpProcessingError):
            super().exception(msg, *args, exc_info=exc_info, **kwargs)
            return
        self.malformed += 1
        remote = args[0] if args else "?"
        reason = " ".join(str(error.message or error).split())[:_REASON_CHARS]
        self._last = f"{reason} (from {remote})"
        if self._flush is None:
            self.warning(
                "malformed HTTP request answered 400: %s; more in the next %g s are counted in one line",
                self._last, self.interval,
            )
            self._flush = asyncio.get_running_loop().call_later(self.interval, self._end_interval)
        else:
            self._counted += 1

    def _end_interval(self) -> None:
        if not self._counted:
            self._flush = None  # a quiet interval: the next one is logged at once again
            return
        self.warning(
            "%d more malformed HTTP requests answered 400 in the last %g s (the last: %s)",
            self._counted, self.interval, self._last,
        )
        self._counted = 0
        # Still under way: go on counting, so that a flood costs one line per interval.
        self._flush = asyncio.get_running_loop().call_later(self.interval, self._end_interval)

    def close(self) -> None:
        """The server stops: say how many were counted since the last line, if any."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
            if self._counted:
                self.warning("%d more malformed HTTP requests answered 400 (the last: %s)", self._counted, self._last)
                self._counted = 0
