"""How a reader of an archive rides out its database going away: which errors mean that, the
backoff between two attempts to open it again, and the one line it says each way.

A reader (`transcript --follow`, the console) holds no lock and commits nothing, so unlike a
writer's session (see `aun_runtime.storage._postgres`: a session is proof of life, never renewed
behind its user's back) its session may simply be opened again. It goes on from the last record it
showed: records are read by id, after the last id shown, so nothing is skipped and nothing is shown
twice however long the database was away.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..base._errors import StorageSessionLostError, StorageUnavailableError

__all__ = ["RECONNECT_FIRST", "RECONNECT_MAX", "Reconnection", "is_connection_lost"]

#: Seconds before the first attempt to open the database again; each failed attempt doubles the wait.
RECONNECT_FIRST = 0.2
#: The longest wait between two attempts: a restarted server is read again within this of being back.
RECONNECT_MAX = 2.0
#: SQLSTATE classes that say the session or the server is gone, not that a statement is wrong:
#: 08 connection exception, 57 operator intervention (a shutdown, a crash of another session, a
#: server still starting up).
_GONE_CLASSES = ("08", "57")


def is_connection_lost(error: BaseException) -> bool:
    """Whether `error` says the database went away (a session ended, a server that does not
    answer, is shutting down or starting up), rather than that the reader did something wrong."""
    if isinstance(error, (StorageSessionLostError, StorageUnavailableError, OSError)):
        return True
    sqlstate = getattr(error, "sqlstate", None)  # asyncpg's server errors carry it
    return isinstance(sqlstate, str) and sqlstate[:2] in _GONE_CLASSES


class Reconnection:
    """The state of a reader whose database may go away: when to try again, and what to say.

    Args:
        what: the database, as shown (a URL with its password hidden).
        say: writes one line (stderr, a log).
    """

    def __init__(self, what: str, say: Callable[[str], None]) -> None:
        self.what = what
        self._say = say
        #: When the database went away (monotonic seconds), or None while it is there.
        self.down_since: float | None = None
        self._wait = RECONNECT_FIRST
        self._retry_at = 0.0

    def lost(self, error: BaseException) -> None:
        """An attempt failed, or the database went away: the first time, say so; wait longer each time."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
            self._wait = RECONNECT_FIRST
            reason = _one_line(error).replace(self.what, "it") if self.what else _one_line(error)
            self._say(f"lost the database {self.what} ({reason}); reconnecting, every {RECONNECT_MAX:g} s at most")
        else:
            self._wait = min(self._wait * 2, RECONNECT_MAX)
        self._retry_at = now + self._wait

    def wait(self) -> float:
        """Seconds until the next attempt is due (0 when it is)."""
        return max(0.0, self._retry_at - time.monotonic())

    def back(self, resumed: str) -> None:
        """The database is open again: say so, once, and how the reader goes on (`resumed`)."""
        if self.down_since is not None:
            self._say(f"reconnected to {self.what} after {time.monotonic() - self.down_since:.1f} s; {resumed}")
        self.down_since = None
        self._wait = RECONNECT_FIRST
        self._retry_at = 0.0


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
