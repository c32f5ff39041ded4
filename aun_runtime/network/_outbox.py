"""The outbox: messages waiting to leave for the AUN network, kept in SQLite until the network has them.

A local send to a remote AID returns once its message is *committed* here, not when the network
has it: a gateway that is down, a connection being re-established, or a process that dies and starts
again loses nothing. Rows leave the outbox only after the network answered the send. The sender of a
row is known, and the network deduplicates by (sender, `message_id`), so a row sent again after a
crash (sent, but its removal not yet committed) is stored once.

The rows are kept by an `OutboxStore` (`._outbox_store`: its schema, and the SQLite file).

Writes are group commits: every row put while one commit runs goes into the next, so a burst of
sends costs one transaction, not one each. They run on one worker thread (sqlite3 releases the GIL),
never on the event loop. Removals need no one to wait for them and ride on the next commit, or are
committed `REMOVAL_DELAY` seconds later.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from protocols.aun import AUNMessage

from ..base._errors import OutboxFullError
from ._outbox_store import OutboxRow, OutboxStore, OutboxWriteError, SQLiteOutboxStore

__all__ = ["DEFAULT_OUTBOX_CAPACITY", "Outbox", "OutboxItem", "OutboxWriteError"]

log = logging.getLogger("aun_runtime.gateway")

#: Messages that may wait for the network. A day-long outage of an agent that sends one message a
#: second fits; past it a send is refused at once (a dead letter the sender hears about) rather than
#: growing the file without bound.
DEFAULT_OUTBOX_CAPACITY = 100_000
#: Seconds a removal may wait for a commit to ride on. A removal lost to a crash only means the
#: message is sent once more, and the network stores it once.
REMOVAL_DELAY = 0.05


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One message waiting to leave: who sends it, to whom, the message, and the trace it was sent
    in (a W3C `traceparent`; None when the sender does not trace)."""

    id: int
    sender: str
    recipient: str | None
    message: AUNMessage
    trace: str | None = None

    @property
    def lane(self) -> str:
        """Messages of one sender to one destination leave in order; different lanes do not wait
        for each other."""
        return self.recipient if self.recipient is not None else f"group:{self.message.group_id}"


class Outbox:
    """A durable FIFO of messages for the network.

    Args:
        path: the SQLite file (created with its directory), kept by a `SQLiteOutboxStore`.
        capacity: how many messages may wait; [`put`][aun_runtime.AgentStateStore.put] refuses more.
    """

    def __init__(self, path: str | Path, capacity: int = DEFAULT_OUTBOX_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("the outbox capacity must be at least 1")
        self.path = Path(path)
        self.capacity = capacity
        self.store: OutboxStore = SQLiteOutboxStore(self.path)
        self._waiting = [
            OutboxItem(i, s, r, AUNMessage.from_json(b), t) for i, s, r, b, t in self.store.waiting()
        ]
        self._next_id = (self._waiting[-1].id if self._waiting else 0) + 1
        self._size = len(self._waiting)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="aun-outbox")
        self._inserts: list[OutboxRow] = []
        self._removals: list[int] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._committer: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.commits = 0

    def __len__(self) -> int:
        """Messages taken and not yet delivered to the network."""
        return self._size

    def take_waiting(self) -> list[OutboxItem]:
        """The messages found in the file when it was opened, oldest first (handed out once)."""
        waiting, self._waiting = self._waiting, []
        return waiting

    async def put(self, sender: str, recipient: str | None, message: AUNMessage, trace: str | None = None) -> OutboxItem:
        """Take `message` (sent in the trace `trace`, if any); return once it is committed.

        Raises:
            OutboxFullError: `capacity` messages are waiting already.
            OutboxWriteError: the commit failed; the message was not taken.
        """
        if self._closed:
            raise OutboxWriteError("the outbox is closed: the gateway agent has stopped")
        if self._size >= self.capacity:
            raise OutboxFullError(
                f"the outbox holds {self.capacity} messages waiting for the network; "
                "this one was refused (raise GatewayAgentConfig.outbox_capacity, or restore the connection)"
            )
        item = OutboxItem(self._next_id, sender, recipient, message, trace)
        self._next_id += 1
        self._size += 1
        self._inserts.append((item.id, sender, recipient, message.to_json(), time.time_ns() // 1_000_000, trace))
        done = asyncio.get_running_loop().create_future()
        self._waiters.append(done)
        self._commit_soon()
        try:
            await done
        except OutboxWriteError:
            self._size -= 1
            raise
        return item

    def remove(self, item: OutboxItem) -> None:
        """The network has `item`: forget it (committed with the next write, or shortly)."""
        self._size -= 1
        self._removals.append(item.id)
        if self._committer is None and self._timer is None and not self._closed:
            self._timer = asyncio.get_running_loop().call_later(REMOVAL_DELAY, self._commit_soon)

    async def close(self) -> None:
        """Commit what is pending and close the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._committer is not None:
            await asyncio.gather(self._committer, return_exceptions=True)
        if self._inserts or self._removals:
            await self._commit_all()
        self._executor.submit(self.store.close).result()
        self._executor.shutdown()

    def _commit_soon(self) -> None:
        self._timer = None
        if self._committer is None:
            self._committer = asyncio.get_running_loop().create_task(self._commit_all(), name="aun:outbox-commit")

    async def _commit_all(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._inserts or self._removals:
                inserts, removals, waiters = self._inserts, self._removals, self._waiters
                self._inserts, self._removals, self._waiters = [], [], []
                try:
                    await loop.run_in_executor(self._executor, self.store.write, inserts, removals)
                except OutboxWriteError as exc:
                    log.error("outbox commit failed: %s", exc)
                    self._removals[:0] = removals  # tried again with the next commit
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(OutboxWriteError(f"the outbox could not commit: {exc}"))
                    if not self._inserts:
                        return  # removals alone wait for the next put, rather than retrying in a loop
                    continue
                self.commits += 1
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)
        finally:
            self._committer = None
