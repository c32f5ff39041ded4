"""The handoffs contract: a customer talks to one service agent at a time, and agents hand the
conversation to each other as messages.

The customer keeps the conversation and sends it whole with each message, so every agent works
from the same history and keeps no state of its own. A handoff carries the history to the next
agent, who answers the customer directly; from then on the customer writes to that agent.

| message | from -> to | meaning |
|---|---|---|
| CustomerMessage | customer -> current agent | the customer's latest words, with the history |
| Handoff | agent -> agent | take over this conversation (and why) |
| AgentReply | agent -> customer | the agent's answer; write to me from now on |
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._identifiers import AID
from ._text import snip
from .contract import AUNContract

__all__ = ["AgentReply", "ChatTurn", "CustomerMessage", "Handoff"]


class ChatTurn(BaseModel):
    """One turn of the conversation: who spoke (`customer` or an agent's AID) and what they said."""

    model_config = ConfigDict(frozen=True)

    role: Literal["customer", "agent"]
    speaker: str
    text: str


class CustomerMessage(AUNContract, wire_name="aun.handoffs.CustomerMessage"):
    """The customer's latest words; `history` is everything said before them."""

    session_id: str = Field(min_length=1, max_length=128)
    text: str = Field(min_length=1)
    history: list[ChatTurn] = Field(default_factory=list)

    def summary(self) -> str:
        return snip(self.text, 60)


class Handoff(AUNContract, wire_name="aun.handoffs.Handoff"):
    """A conversation handed to another agent. The last turn of `history` is the customer's."""

    session_id: str
    customer: AID
    history: list[ChatTurn] = Field(min_length=1)
    reason: str = ""

    def summary(self) -> str:
        return f"handoff of {self.session_id}" + (f": {snip(self.reason, 60)}" if self.reason else "")


class AgentReply(AUNContract, wire_name="aun.handoffs.AgentReply"):
    """An agent's answer to the customer."""

    session_id: str
    agent: AID
    text: str

    def summary(self) -> str:
        return snip(self.text, 60)
