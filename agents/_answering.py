"""`AnsweringAgent`: sends made while handling a message are marked as answering it.

The pattern agents pass work along chains (task -> code -> run -> review ...). Marking each send as
the answer to the message that caused it (`in_reply_to`) lets a transcript nest every step under
its cause, instead of showing each one as a conversation of its own. Thread and hop count are carried
by the runtime either way.
"""

from __future__ import annotations

from typing import Any

from aun_runtime import DEFAULT_TURN_RETRY, AUNAgent, AUNContract, AUNMessage, TurnRetry
from protocols.aun import Payload

PayloadLike = Payload | AUNContract | str | dict[str, Any]

__all__ = ["AnsweringAgent", "ModelAnsweringAgent"]


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


class ModelAnsweringAgent(AnsweringAgent):
    """An `AnsweringAgent` that asks a model in its turns: a turn that failed for a passing cause (its
    model rate-limited, down or answering nonsense) is tried again under `DEFAULT_TURN_RETRY`, as
    `AutonomousAgent`'s are.

    A handler of such an agent changes its own state only after its model calls, or puts it back when
    one fails, so that a second try (or a redrive) starts where the first one did.
    """

    turn_retry: TurnRetry | None = DEFAULT_TURN_RETRY
