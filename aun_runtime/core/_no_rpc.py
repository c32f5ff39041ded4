"""The one refusal every core of this project shares: `send_message`.

A receiver has no obligation to respond, so a runtime offers no request/response call. A core
lists `RefusesRPC` first among its bases, ahead of the autogen-core runtime it builds on.
"""

from __future__ import annotations

from typing import Any, NoReturn

from autogen_core import AgentId, CancellationToken

from ..base._errors import RPCForbiddenError

__all__ = ["RefusesRPC"]


class RefusesRPC:
    """A runtime whose `send_message` raises [`RPCForbiddenError`][aun_runtime.RPCForbiddenError]."""

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> NoReturn:
        """Refused: a receiver has no obligation to respond. Nothing is queued."""
        raise RPCForbiddenError()
