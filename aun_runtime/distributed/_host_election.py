"""Host state in a shared database (PostgreSQL), and the election of the one host that serves.

`aun-runtime host --state postgresql://...` keeps what a state file keeps (`._host_state`: worker
names bound to their secrets' digests, AID ownership, service AIDs, groups) in the table
`aun_host_state`, one JSON row. Several hosts may be given the same database: each stands by until
its session takes the hosts' lock (`HOST_LOCK`, one of the dialect's `SessionLocks`), and only the
host whose session holds it serves (binds its port, routes). The server lets go of the lock when that session ends: at once
when the serving host's process dies, within `SESSION_TIMEOUT` seconds when it is cut off; a
standby then takes it, reads the state back (everything *away*) and serves, and the workers, given
every host's address (`--host A,B`), reconnect to it.

A deposed host is fenced as a worker is: every write of the state checks, in its own transaction,
that its session still holds the lock, and its session's end (seen by any statement, or by the
session's watch within a second when idle) stops it serving at once; it then stands by again. What
it routed meanwhile needs no fence of its own: every message is numbered by its sender and handled
once by its receiver's journal (and its service ledger), whichever host carried it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from ..base._errors import DatabaseUnreachableError, StorageSessionLostError
from ..storage import Storage, open_storage
from ..storage._archive import create_tables
from ..storage._storage_wait import RETRY_INTERVAL
from ._errors import HostStateError
from ._host_state import STATE_FORMAT, Snapshot, empty_state

__all__ = ["ELECTION_INTERVAL", "HOST_LOCK", "ElectedHostState"]

logger = logging.getLogger("aun_runtime.distributed")

#: The hosts' advisory lock: whoever's session holds it serves. Apart from the workers' locks
#: (`._journal.LIVE_LOCK_CLASS`), whose first key is another constant.
HOST_LOCK = (0x41554F, 1)
#: Seconds between two tries of a standby host for the lock.
ELECTION_INTERVAL = 0.5
#: One JSON row, in SQL that every database speaks.
_TABLE = "CREATE TABLE IF NOT EXISTS aun_host_state (name TEXT PRIMARY KEY, state TEXT NOT NULL);"


class ElectedHostState:
    """The state of the hosts that share `url`, held by the one that is elected.

    Args:
        url: the shared database (`postgresql://`) the hosts (and, usually, the workers) share: its
            dialect's session locks elect the host.
    """

    def __init__(self, url: str) -> None:
        self.given = url
        self._storage: Storage | None = None
        self.path: Path | str = url
        #: Set once the serving host's session has ended: it must stop serving (it is deposed).
        self.lost = asyncio.Event()
        self.loaded: Snapshot = empty_state()
        self._written: Snapshot | None = None
        self._write_lock = asyncio.Lock()

    async def elect(self) -> None:
        """Wait (for ever) until this host's session holds the hosts' lock, then read the state."""
        loop = asyncio.get_running_loop()

        def deposed(_error: BaseException) -> None:  # from the session's thread
            loop.call_soon_threadsafe(self.lost.set)

        said = False
        while True:
            try:
                storage = await asyncio.to_thread(open_storage, self.given, on_lost=deposed)
            except DatabaseUnreachableError as exc:
                logger.warning("host: waiting for the database: %s", exc)
                await asyncio.sleep(RETRY_INTERVAL)
                continue
            self.path = storage.location
            try:
                create_tables(storage, _TABLE, _TABLE)  # one creator at a time, in a database that is the runtime's
                while not storage.dialect.try_lock(storage, HOST_LOCK):
                    if not said:
                        logger.info("host: standing by: another host serves from %s", storage.location)
                        said = True
                    await asyncio.sleep(ELECTION_INTERVAL)
                rows = storage.fetch("SELECT state FROM aun_host_state WHERE name = 'host'")
            except StorageSessionLostError:
                storage.close()
                self.lost.clear()
                await asyncio.sleep(RETRY_INTERVAL)
                continue
            except BaseException:
                storage.close()
                raise
            self._storage = storage
            storage.watch()  # a serving host cut off from the database learns it within seconds
            if rows:
                self.loaded = self._read(rows[0][0])
            self._written = self.loaded
            logger.info("host: elected: serving with the state in %s", storage.location)
            return

    def _read(self, text: Any) -> Snapshot:
        try:
            state = json.loads(text)
        except ValueError as exc:
            raise HostStateError(f"{self.path} holds a host state that is not JSON: {exc}", value=self.given) from None
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise HostStateError(f"{self.path} holds a host state of another format", value=self.given)
        return {section: state[section] for section in empty_state()}

    async def save(self, snapshot: Any) -> None:
        """Write what `snapshot()` gives, in a transaction that holds the lock; return once committed.

        Raises:
            HostStateError: not written (the session ended: this host is deposed).
        """
        async with self._write_lock:
            state = snapshot()
            if state == self._written:
                return
            storage = self._storage
            if storage is None:
                raise HostStateError("the host is not elected: it keeps no state", value=self.given)
            text = json.dumps({"format": STATE_FORMAT, **state}, sort_keys=True, separators=(",", ":"))

            def write() -> None:
                with storage.transaction():
                    if not storage.dialect.holds_lock(storage, HOST_LOCK):
                        raise StorageSessionLostError("this host no longer holds the hosts' lock")
                    storage.execute(
                        "INSERT INTO aun_host_state (name, state) VALUES ('host', ?)"
                        " ON CONFLICT (name) DO UPDATE SET state = excluded.state",
                        (text,),
                    )

            try:
                await asyncio.to_thread(write)
            except StorageSessionLostError as exc:
                self.lost.set()
                raise HostStateError(f"the host could not write its state to {self.path}: {exc}") from exc
            self._written = state

    def close(self) -> None:
        """End the session: the lock goes with it, and a standby takes over."""
        if self._storage is not None:
            self._storage.close()
            self._storage = None
