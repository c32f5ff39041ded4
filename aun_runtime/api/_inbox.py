"""`Inbox`: how code outside any agent sends and hears back."""

from __future__ import annotations

import asyncio
from typing import Any

from autogen_core import MessageContext

from protocols.aun import AUNMessage

from ..base._waiting import wait_set
from ._agent import AUNAgent

__all__ = ["Inbox"]


class Inbox(AUNAgent):
    """An application's mailbox: keeps every message it receives, for code outside any agent.

    `await inbox.next(timeout=...)` waits for the next message, and `inbox.replies_to(question)`
    lists the answers to one: both give what was said (text and json payloads, and payloads of
    types this version does not know), and leave out the `tool_call`/`tool_result` annotations in
    which an agent shows its own tool use, unless asked for them (`annotations=True`). So
    `[m.text for m in inbox.replies_to(question)]` reads the answers whether or not the agent used a
    tool. `received` holds every message, annotations included (up to `capacity`, oldest first).
    Silence is legal: `next` returns None on timeout, it does not raise.
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

    async def _dispatch(self, message: Any, ctx: MessageContext, tried: int = 1) -> None:
        if isinstance(message, AUNMessage):
            self.received.append(message)
            if len(self.received) > self.capacity:
                del self.received[0]
                self._cursor = max(0, self._cursor - 1)
            self._arrived.set()

    async def next(self, timeout: float | None = None, *, annotations: bool = False) -> AUNMessage | None:
        """The next message not yet read, waiting up to `timeout` seconds; None if none came.

        Args:
            timeout: seconds to wait (None: until one comes).
            annotations: also return tool annotations; by default they are passed over (they stay
                in `received`).
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            while self._cursor >= len(self.received):
                self._arrived.clear()
                left = None if deadline is None else max(0.0, deadline - loop.time())
                if not await wait_set(self._arrived, left):
                    return None
            message = self.received[self._cursor]
            self._cursor += 1
            if annotations or not message.is_annotation:
                return message

    def replies_to(self, message: AUNMessage | str, *, annotations: bool = False) -> list[AUNMessage]:
        """Every message received so far that answers `message` (zero, one or many), in arrival order.

        Args:
            message: the message answered, or its id.
            annotations: also the tool annotations sent in answer to it (the answering agent's
                `tool_call` and `tool_result` notes), among the rest in arrival order.
        """
        message_id = message.message_id if isinstance(message, AUNMessage) else message
        return [
            m for m in self.received if m.in_reply_to == message_id and (annotations or not m.is_annotation)
        ]
