"""`AgentHost`: the part of a runtime that an agent, and the endpoint that delivers to it, use.

[`AUNAgent`][aun_runtime.AUNAgent] never reaches into [`AUNRuntime`][aun_runtime.AUNRuntime] itself: what it
needs of the runtime it lives in is declared here, so the agent depends on this protocol and the
runtime implements it. `agent.aun` is an `AgentHost`: an agent can send (the send tools call
[`AgentHost.send_as`][aun_runtime.AgentHost.send_as]), look things up (groups, metadata, the archive, the budget ledger), and
record what went wrong; it cannot register agents or change groups, which is the application's
business.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from protocols.aun import AUNMessage, Mention

    from ..base._agent_md import AgentCard
    from ..base._budgets import BudgetLedger
    from ..base._errors import BudgetExceeded
    from ..base._groups import GroupInfo
    from ..base._payload import PayloadLike
    from ..base._stats import RuntimeStats
    from ..storage._archive import Archive
    from ._mailbox import MailboxOptions
    from ._mailbox_rule import MailboxRule
    from ._turns import TurnWatch

__all__ = ["AgentHost"]


class AgentHost(Protocol):
    """What an agent may use of the runtime it lives in (`agent.aun`)."""

    @property
    def domain(self) -> str:
        """The local domain: AIDs `<name>.<domain>` are local."""
        ...

    @property
    def archive(self) -> Archive:
        """Every message, verdict, thought and failure of this runtime."""
        ...

    @property
    def stats(self) -> RuntimeStats:
        """The counters of what happened to messages."""
        ...

    @property
    def ledger(self) -> BudgetLedger:
        """The counts behind the budgets: threads' breadth and each agent's model use."""
        ...

    @property
    def mailbox_options(self) -> MailboxOptions:
        """How every agent's mailbox is made: its bound, overflow policy and blocking timeout."""
        ...

    @property
    def dedup_window(self) -> int:
        """How many recent message keys each agent's channel remembers."""
        ...

    @property
    def turns(self) -> TurnWatch:
        """The turns in flight: each handler run and proactive action, under its handler timeout."""
        ...

    def handler_timeout_of(self, aid: str) -> float | None:
        """Seconds a turn of the local agent `aid` may run (None: no limit)."""
        ...

    @property
    def mailbox_rule(self) -> MailboxRule:
        """Who admits messages to mailboxes and takes turns: the core, or delivery."""
        ...

    async def send_as(
        self,
        sender: str,
        payload: PayloadLike,
        *,
        to: str | None = None,
        group_id: str | None = None,
        mentions: Sequence[str | Mention] | None = None,
        in_reply_to: AUNMessage | str | None = None,
        message_id: str | None = None,
    ) -> AUNMessage:
        """Send as the local AID `sender`: a direct message `to` an AID, or a post to `group_id`.

        While a handler (or [`acting_on`][aun_runtime.AUNAgent.acting_on]) runs, the message continues the
        thread of the message being handled, one hop further, and counts in that thread's budgets.
        """
        ...

    def was_member(self, group_id: str, aid: str, seq: int) -> bool:
        """Whether `aid` was in `group_id` when its message number `seq` was posted (True for a
        group this runtime does not hold: whoever holds it decided)."""
        ...

    def keep_task(self, task: asyncio.Task[None]) -> None:
        """Cancel `task` (an agent's scheduled action) when the runtime stops."""
        ...

    def record_dead_letter(self, owner: str, message: AUNMessage | None, error: BaseException) -> None:
        """Record that `message` could not be delivered to, or handled by, `owner`."""
        ...

    def record_budget_stop(self, owner: str, error: BudgetExceeded, message: AUNMessage | None = None) -> None:
        """Record that a budget stopped `owner` (a send, with the message refused, or a model call)."""
        ...

    def record_model_anomaly(self, owner: str, detail: str, message: AUNMessage | None = None) -> None:
        """Record that the model of `owner` answered something that is not an answer (`detail`)."""
        ...

    def is_local(self, aid: str) -> bool:
        """True if `aid` is registered in this runtime."""
        ...

    def is_agent(self, aid: str) -> bool:
        """True if `aid` is a local agent (not an application's inbox)."""
        ...

    def group(self, group_id: str) -> GroupInfo:
        """The group as it stands now."""
        ...

    def groups(self) -> list[GroupInfo]:
        """Every group of this runtime as it stands now."""
        ...

    def agent_info(self, aid: str) -> dict[str, str]:
        """AUN metadata of a local agent: AID, behaviour mode and description."""
        ...

    def agent_card(self, aid: str) -> AgentCard | None:
        """The agent.md card of a local agent, if it has one."""
        ...

    async def ping(self, aid: str) -> bool:
        """Ask explicitly whether `aid` is reachable. Never inferred from silence."""
        ...
