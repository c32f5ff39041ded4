"""Where the actor runtime's failures go: the facade's `on_undeliverable` hook, the log, and `stop()`.

A message that will not be handled (refused by a full mailbox, dropped by an intervention handler,
for an agent that cannot be created, whose handler raised, or still queued at a stop) is reported
here by whichever part of the runtime met it; with `ignore_unhandled_exceptions=False` a handler's
failure and an agent's failed creation are also kept, for `stop()` to raise, as autogen-core does.
It is apart so that the rule for each kind of failure is written once, whoever meets it; the rule
for passing one to the hook, `report_undeliverable`, serves the single-threaded core too.
"""

from __future__ import annotations

import logging
from typing import Any

from autogen_core import AgentId

from ..delivery._core_protocol import UndeliverableHook

__all__ = ["DeliveryFailures", "report_undeliverable"]

logger = logging.getLogger("aun_runtime")


def report_undeliverable(
    hook: UndeliverableHook | None, agent_id: AgentId, message: Any, error: BaseException
) -> None:
    """Pass a message that will not reach `agent_id` to `hook`, or log it when there is none.

    A hook that raises is logged: it runs inside a drain, a publish or a stop, and letting it escape
    would strand the drain's queue, abort the publish midway through its recipients, or leave the
    stop half done.
    """
    if hook is None:
        logger.warning("undeliverable %s for %s: %s", type(message).__name__, agent_id, error)
        return
    try:
        hook(agent_id, message, error)
    except Exception:
        logger.exception(
            "on_undeliverable raised while reporting a %s for %s (%s)", type(message).__name__, agent_id, error
        )


class DeliveryFailures:
    """Reports the messages one [`AUNActorRuntime`][aun_runtime.AUNActorRuntime] will not handle.

    Args:
        ignore_unhandled: as autogen-core's `ignore_unhandled_exceptions`: if False, the first
            exception a handler or an agent's creation raises is kept for `raise_kept`.

    Attributes:
        on_undeliverable: the facade's hook (set by the runtime's `attach`); without one, failures
            are logged.
    """

    __slots__ = ("_ignore_unhandled", "_kept", "on_undeliverable")

    def __init__(self, ignore_unhandled: bool) -> None:
        self._ignore_unhandled = ignore_unhandled
        self._kept: Exception | None = None
        self.on_undeliverable: UndeliverableHook | None = None

    def undeliverable(self, agent_id: AgentId, message: Any, error: BaseException) -> None:
        """`message` will not reach `agent_id`."""
        report_undeliverable(self.on_undeliverable, agent_id, message, error)

    def handler_failed(self, agent_id: AgentId, message: Any, error: BaseException) -> None:
        """The handler of `agent_id` raised `error` on `message` (or was cancelled inside it)."""
        if self.on_undeliverable is None:
            logger.error("handler of %s raised on a %s", agent_id, type(message).__name__, exc_info=error)
        else:
            report_undeliverable(self.on_undeliverable, agent_id, message, error)
        # A cancelled message is no error of the handler; and stop() raising CancelledError would
        # read as stop() itself having been cancelled.
        if isinstance(error, Exception):
            self.keep(error)

    def keep(self, error: Exception) -> None:
        """Keep `error` (a handler's, or an agent's failed creation) for `raise_kept`, unless
        unhandled exceptions are ignored or an earlier one is kept."""
        # As autogen-core's runtime: an agent that cannot be made for a message is as unhandled as a
        # handler that raises, so with ignore_unhandled_exceptions=False stop() raises it too.
        if not self._ignore_unhandled and self._kept is None:
            self._kept = error

    def raise_kept(self) -> None:
        """Raise the first failure kept since the last call, if any (and keep it no longer)."""
        error, self._kept = self._kept, None
        if error is not None:
            raise error
