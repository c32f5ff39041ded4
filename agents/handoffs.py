"""Handoffs: service agents that answer a customer or hand the conversation to a better-placed agent.

A `ServiceAgent` offers the model one *handoff tool* per colleague (`transfer_to_sales` and
so on) next to its ordinary tools. An ordinary tool call runs the tool and asks the model again; a
handoff call sends a `Handoff` message to that colleague, who answers the
customer from then on; plain text goes to the customer as an `AgentReply`.
Delegation is a message, never a call that waits.

`HumanDesk` stands in for a person: it reads its answers from a queue (instead of `input()`)
and tells the customer when nobody is there in time. `Customer` stands in for the customer: it
speaks first, reads its lines from a queue, and writes to whichever agent answered it last.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import Tool, ToolSchema

from aun_runtime import MessageContext, event
from protocols.handoffs import AgentReply, ChatTurn, CustomerMessage, Handoff

from ._answering import AnsweringAgent, ModelAnsweringAgent
from ._model_calls import ModelLike, speaker_name, use_model

__all__ = ["MAX_TOOL_STEPS", "Customer", "HumanDesk", "ServiceAgent"]

#: Tool calls one turn may make before the agent gives up on it: a model that keeps calling tools
#: without ever answering must not hold the agent (and its mailbox) forever.
MAX_TOOL_STEPS = 5


def _handoff_schema(name: str, target: str) -> ToolSchema:
    return {
        "name": name,
        "description": f"Hand the conversation over to {target}.",
        "parameters": {
            "type": "object",
            "properties": {"reason": {"type": "string", "description": "why, in a few words"}},
            "required": [],
        },
    }


class ServiceAgent(ModelAnsweringAgent):
    """Answers the customer, uses its tools, or hands the conversation to a colleague.

    Args:
        model: the model client, or a config to build one from.
        instructions: the agent's role and rules (its system prompt).
        handoffs: handoff tool name -> the colleague's AID, e.g. `{"transfer_to_sales": "sales.local"}`.
        tools: ordinary tools the agent may run.
    """

    def __init__(
        self,
        model: ModelLike,
        *,
        instructions: str,
        handoffs: dict[str, str] | None = None,
        tools: Sequence[Tool] = (),
    ) -> None:
        super().__init__(instructions.strip().splitlines()[0])
        self.model = use_model(model)
        self.instructions = instructions
        self.handoffs = dict(handoffs or {})
        self.tools = {tool.name: tool for tool in tools}

    @event
    async def on_customer(self, message: CustomerMessage, ctx: MessageContext) -> None:
        inbound = self.inbound
        assert inbound is not None
        turn = ChatTurn(role="customer", speaker="customer", text=message.text)
        await self._serve(message.session_id, inbound.from_aid, [*message.history, turn])

    @event
    async def on_handoff(self, message: Handoff, ctx: MessageContext) -> None:
        await self._serve(message.session_id, message.customer, message.history)

    async def _serve(self, session_id: str, customer: str, history: list[ChatTurn]) -> None:
        conversation: list[LLMMessage] = [SystemMessage(content=self.instructions)]
        for turn in history:
            if turn.role == "customer":
                conversation.append(UserMessage(content=turn.text, source="customer"))
            else:
                conversation.append(AssistantMessage(content=turn.text, source=speaker_name(turn.speaker)))
        schemas: list[Tool | ToolSchema] = [*self.tools.values()]
        schemas += [_handoff_schema(name, target) for name, target in self.handoffs.items()]
        for _ in range(MAX_TOOL_STEPS):
            result = await self.model.create(conversation, tools=schemas)
            if isinstance(result.content, str):
                reply = AgentReply(session_id=session_id, agent=self.aid, text=result.content.strip())
                await self.send(customer, reply)
                return
            handoff = next((call for call in result.content if call.name in self.handoffs), None)
            if handoff is not None:
                target = self.handoffs[handoff.name]
                reason = _argument(handoff, "reason")
                self.think(f"handing {session_id} to {target}" + (f": {reason}" if reason else ""))
                await self.send(
                    target, Handoff(session_id=session_id, customer=customer, history=history, reason=reason)
                )
                return
            conversation.append(AssistantMessage(content=result.content, source=speaker_name(self.aid)))
            conversation.append(
                FunctionExecutionResultMessage(content=[await self._run(c) for c in result.content])
            )
        self.think(f"{session_id}: no answer after {MAX_TOOL_STEPS} tool steps")
        sorry = "Sorry, I could not finish that. Could you put it another way?"
        await self.send(customer, AgentReply(session_id=session_id, agent=self.aid, text=sorry))

    async def _run(self, call: FunctionCall) -> FunctionExecutionResult:
        tool = self.tools.get(call.name)
        if tool is None:
            return FunctionExecutionResult(
                content=f"no tool named {call.name}", name=call.name, call_id=call.id, is_error=True
            )
        try:
            arguments = json.loads(call.arguments or "{}")
            value = await tool.run_json(arguments, CancellationToken(), call_id=call.id)
            return FunctionExecutionResult(
                content=tool.return_value_as_string(value), name=call.name, call_id=call.id
            )
        except Exception as exc:  # a failing tool is reported to the model, which may recover
            return FunctionExecutionResult(
                content=f"{type(exc).__name__}: {exc}", name=call.name, call_id=call.id, is_error=True
            )


def _argument(call: FunctionCall, name: str) -> str:
    try:
        value = json.loads(call.arguments or "{}").get(name, "")
    except (ValueError, AttributeError):
        return ""
    return str(value)


class HumanDesk(AnsweringAgent):
    """A person's desk: answers come from `answers` (a queue someone fills), not from `input()`.

    Args:
        answers: where the person's answers come from, in order.
        wait: seconds to wait for an answer before telling the customer nobody is there.
    """

    def __init__(self, answers: asyncio.Queue[str], *, wait: float = 30.0) -> None:
        super().__init__("a person, answering from a queue")
        self.answers = answers
        self.wait = wait

    @event
    async def on_handoff(self, message: Handoff, ctx: MessageContext) -> None:
        await self._answer(message.session_id, message.customer)

    @event
    async def on_customer(self, message: CustomerMessage, ctx: MessageContext) -> None:
        inbound = self.inbound
        assert inbound is not None
        await self._answer(message.session_id, inbound.from_aid)

    async def _answer(self, session_id: str, customer: str) -> None:
        try:
            text = await asyncio.wait_for(self.answers.get(), self.wait)
        except TimeoutError:
            self.think(f"{session_id}: nobody answered within {self.wait} s")
            text = "Nobody is at the desk right now; we will write back to you."
        await self.send(customer, AgentReply(session_id=session_id, agent=self.aid, text=text))


class Customer(AnsweringAgent):
    """A customer: says its first line to `first_agent` on start, then one line per reply it gets.

    Args:
        lines: what the customer says, in order (a queue; an empty queue means the customer is done).
        first_agent: whom it writes to first.
        session_id: the conversation's id.
    """

    def __init__(self, lines: asyncio.Queue[str], *, first_agent: str, session_id: str = "session-1") -> None:
        super().__init__("a customer, speaking from a queue")
        self.lines = lines
        self.agent = first_agent
        self.session_id = session_id
        self.history: list[ChatTurn] = []

    async def on_start(self) -> None:
        await self._say_next()

    @event
    async def on_reply(self, message: AgentReply, ctx: MessageContext) -> None:
        self.history.append(ChatTurn(role="agent", speaker=message.agent, text=message.text))
        self.agent = message.agent  # whoever answered is who we talk to now
        await self._say_next()

    async def _say_next(self) -> None:
        try:
            text = self.lines.get_nowait()
        except asyncio.QueueEmpty:
            self.think("nothing more to say")
            return
        await self.send(
            self.agent, CustomerMessage(session_id=self.session_id, text=text, history=self.history)
        )
        self.history.append(ChatTurn(role="customer", speaker="customer", text=text))
