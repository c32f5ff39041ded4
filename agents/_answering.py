"""`AnsweringAgent`: sends made while handling a message are marked as answering it.

The pattern agents pass work along chains (task -> code -> run -> review ...). Marking each send as
the answer to the message that caused it (`in_reply_to`) lets a transcript nest every step under
its cause, instead of showing each one as a conversation of its own. Thread and hop count are carried
by the runtime either way.
"""

from __future__ import annotations

from typing import Any

from aun_runtime import AUNAgent, AUNContract, AUNMessage
from protocols.aun import Payload

PayloadLike = Payload | AUNContract | str | dict[str, Any]

__all__ = ["AnsweringAgent"]


class AnsweringAgent(AUNAgent):
    """An [`AUNAgent`][aun_runtime.AUNAgent] whose [`send`][aun_runtime.Inbox.send] answers the message being handled."""

    async def send(
        self,
        to: str,
        payload: PayloadLike,
        *,
        in_reply_to: AUNMessage | str | None = None,
        message_id: str | None = None,
    ) -> AUNMessage:
        cause = in_reply_to if in_reply_to is not None else self.inbound
        return await super().send(to, payload, in_reply_to=cause, message_id=message_id)
