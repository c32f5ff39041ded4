"""`Inbox`: how code outside any agent sends and hears back."""

from __future__ import annotations

import asyncio
from typing import Any

from autogen_core import MessageContext

from protocols.aun import AUNMessage

from ._agent import AUNAgent

__all__ = ["Inbox"]


class Inbox(AUNAgent):
    """An application's mailbox: keeps every message it receives, for code outside any agent.

    `await inbox.next(timeout=...)` waits for the next one; `received` holds them all (up to
    `capacity`, oldest first). Silence is legal: `next` returns None on timeout, it does not raise.
    """

    #: Messages kept for reading. An application that reads them keeps up; one that does not loses
    #: the oldest from this list (never from the archive, which keeps everything).
    capacity = 10_000
    #: The application holds this instance: it must never be evicted and re-created.
    stay_resident = True

    def __init__(self) -> None:
        super().__init__("application inbox")
        self.received: list[AUNMessage] = []
        self._cursor = 0
        self._arrived = asyncio.Event()

    async def _dispatch(self, message: Any, ctx: MessageContext) -> None:
        if isinstance(message, AUNMessage):
            self.received.append(message)
            if len(self.received) > self.capacity:
                del self.received[0]
                self._cursor = max(0, self._cursor - 1)
            self._arrived.set()

    async def next(self, timeout: float | None = None) -> AUNMessage | None:
        """The next message not yet read, waiting up to `timeout` seconds; None if none came."""
        while self._cursor >= len(self.received):
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except TimeoutError:
                return None
        message = self.received[self._cursor]
        self._cursor += 1
        return message

    def replies_to(self, message: AUNMessage | str) -> list[AUNMessage]:
        """Every message received so far that answers `message` (zero, one or many)."""
        message_id = message.message_id if isinstance(message, AUNMessage) else message
        return [m for m in self.received if m.in_reply_to == message_id]
