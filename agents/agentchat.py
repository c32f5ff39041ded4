"""`AgentChatAgent`: any autogen-agentchat `ChatAgent` as an AUN agent, in one line.

An agentchat agent (an `AssistantAgent` with its model client, tools and memory, or any other
`ChatAgent`) answers every batch of messages it is handed. On the AUN wire that is still an
autonomous agent: it decides what to say, and the adapter decides, from what it said, whether
anything is sent at all.

* Each message from someone else that has text becomes an agentchat `TextMessage` (its `source`
  is the sender's AID made safe as a name) and goes to `on_messages`. The chat agent keeps its
  own memory of the conversation. The agent's own messages (a gateway may echo them back) and
  `tool_call`/`tool_result` payloads (they describe the sender's own tool use) cost no model call.
* The response's `chat_message` is sent with [`reply`][aun_runtime.AUNAgent.reply], naming the sender
  in a `mention` group so that they see it. An answer that is empty, blank, or starts with the
  silence marker (`__SILENT__`) is silence: the decision is archived as a thought, nothing is sent.
* The response's inner messages (tool call requests and results, thoughts, memory queries) are
  archived as thoughts, one line each, and never sent.
* The runtime's budgets hold for it as for every agent ([`Budgets`][aun_runtime.Budgets]): when no
  answer could go out (a thread it overheard and already spoke in), the chat agent is not asked.
  **Every model call is metered**: the adapter wraps each model client the chat agent holds (and
  those of the agents and teams it holds, such as a `SocietyOfMindAgent`'s) in a
  [`MeteredChatCompletionClient`][aun_runtime.models.MeteredChatCompletionClient], so one turn of an `AssistantAgent`
  that calls its tools forty times spends forty calls of the budget, not one; the call past a
  budget is refused before it is made (a budget stop) and ends the turn.
* [`AgentChatAgent.save_state`][agents.agentchat.AgentChatAgent.save_state] wraps the chat agent's own state, so its memory survives the
  runtime's idle eviction and, with a durable state store (`SQLiteStateStore`), a restart.

agentchat is an optional dependency (`pip install aun-runtime[agentchat]`); only this module
imports it.

Example:
    ```python
    from autogen_agentchat.agents import AssistantAgent

    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            "assistant.local", from_agentchat(lambda: AssistantAgent("assistant", model_client=client))
        )
        inbox = await runtime.open_inbox()
        await inbox.send("assistant.local", "What is the capital of France?")
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autogen_agentchat.base import ChatAgent, Response, Team
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, TextMessage
from autogen_core import CancellationToken
from autogen_core.models import ChatCompletionClient

from aun_runtime import AUNAgent, AUNMessage, BudgetExceeded, MessageContext, event
from aun_runtime.models import MeteredChatCompletionClient, metered
from protocols.aun import ToolCallPayload, ToolResultPayload

from ._model_calls import speaker_name

__all__ = ["DEFAULT_SILENCE_MARKER", "AgentChatAgent", "ChatAgentSource", "from_agentchat", "meter_model_clients"]

#: An answer that starts with this is the chat agent choosing to say nothing.
DEFAULT_SILENCE_MARKER = "__SILENT__"
#: A thought about one inner message is cut to this many characters (a tool result may be long).
MAX_THOUGHT_CHARS = 500

#: What the adapter is built from: a factory of chat agents (one per instance: what each AID should
#: have), or a chat agent itself.
ChatAgentSource = Callable[[], ChatAgent] | ChatAgent


class AgentChatAgent(AUNAgent):
    """Runs an autogen-agentchat `ChatAgent` as an AUN agent.

    Args:
        chat_agent: a zero-argument factory returning the chat agent, or the chat agent itself. A
            factory is called once per instance the runtime creates; a chat agent passed as it is
            outlives evictions (each new instance loads the saved state into the same object) and
            must not be shared between AIDs.
        silence_marker: an answer starting with this (after leading blanks) is silence.

    Example:
        ```python
        await runtime.register_agent(
            "assistant.local",
            lambda: AgentChatAgent(lambda: AssistantAgent("assistant", model_client=client)),
        )
        ```
    """

    def __init__(self, chat_agent: ChatAgentSource, *, silence_marker: str = DEFAULT_SILENCE_MARKER) -> None:
        agent = chat_agent if isinstance(chat_agent, ChatAgent) else chat_agent()
        if not isinstance(agent, ChatAgent):
            raise TypeError(f"the factory returned a {type(agent).__name__}, not an agentchat ChatAgent")
        super().__init__(agent.description)
        meter_model_clients(agent)
        self.chat_agent = agent
        self.silence_marker = silence_marker
        #: Model tokens (prompt + completion) the chat agent reported using, and turns it was asked for.
        self.tokens_used = 0
        self.model_turns = 0

    # Not ``on_message``: that name would override autogen-core's BaseAgent.on_message, which the
    # runtime then calls directly, past the AUN delivery (no inbound message, so no reply()).
    @event
    async def on_chat(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.from_aid == self.aid:
            return  # its own message, echoed back: never an occasion to speak
        if isinstance(message.payload, ToolCallPayload | ToolResultPayload):
            self.think(
                f"{message.from_aid}'s {message.payload.type} describes its own tool use: nothing to run"
            )
            return
        text = message.text
        if text is None:
            self.think(f"nothing to read in a {message.payload.type} payload from {message.from_aid}")
            return
        refusal = self.aun.ledger.reply_refusal(self.aid, message)
        if refusal is not None:  # no answer could go out: the chat agent is not asked
            self.think(f"not asking the model about {message.from_aid}'s message: {refusal}")
            return
        self.model_turns += 1
        try:
            # Each model call the turn makes (one per tool round) spends the budgets on its own.
            response = await self.chat_agent.on_messages(
                [TextMessage(content=text, source=speaker_name(message.from_aid))], CancellationToken()
            )
        except BudgetExceeded as exc:  # recorded as a budget stop by the call that was refused
            self.think(f"the turn on {message.from_aid}'s message ended at a budget: {exc.reason}")
            return
        for inner in response.inner_messages or ():
            self.think(_one_line(inner))
        self.tokens_used += _tokens(response)

        answer = response.chat_message.to_text()
        if not answer.strip():
            self.think(f"silent on {message.from_aid}'s message: {self.chat_agent.name} gave an empty answer")
            return
        if answer.lstrip().startswith(self.silence_marker):
            why = answer.lstrip()[len(self.silence_marker) :].strip()
            self.think(f"silent on {message.from_aid}'s message" + (f": {why}" if why else ""))
            return
        await self.reply(answer)  # in a mention group, reply() names the one being answered

    async def save_state(self) -> Mapping[str, Any]:
        """The chat agent's own state (its memory of the conversation), under `"agentchat"`."""
        return {"agentchat": await self.chat_agent.save_state()}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Give the chat agent back the state [`save_state`][agents.agentchat.AgentChatAgent.save_state] saved."""
        await self.chat_agent.load_state(state["agentchat"])

    async def close(self) -> None:
        """Drop this instance. The chat agent and its model client belong to whoever made them:
        neither is closed here (a client may serve many agents)."""
        await super().close()


def from_agentchat(
    factory: ChatAgentSource, *, silence_marker: str = DEFAULT_SILENCE_MARKER
) -> Callable[[], AgentChatAgent]:
    """A factory for [`AUNRuntime.register_agent`][aun_runtime.AUNRuntime.register_agent] that
    runs the chat agent `factory` makes as an AUN agent.

    Args:
        factory: a zero-argument callable returning an agentchat `ChatAgent` (called once per
            instance), or a chat agent (see [`AgentChatAgent`][agents.agentchat.AgentChatAgent]).
        silence_marker: an answer starting with this is silence.

    Example:
        ```python
        await runtime.register_agent(
            "assistant.local", from_agentchat(lambda: AssistantAgent("assistant", model_client=client))
        )
        ```
    """

    def make() -> AgentChatAgent:
        return AgentChatAgent(factory, silence_marker=silence_marker)

    return make


def meter_model_clients(root: ChatAgent | Team) -> int:
    """Wrap every model client `root` keeps, and those of the chat agents and teams it keeps (in
    attributes, or lists of them), in a [`MeteredChatCompletionClient`][aun_runtime.models.MeteredChatCompletionClient].

    agentchat keeps a model client as a plain attribute of the agent (or team) and reads it at the
    start of each turn, so wrapping it there meters every call the agent makes, each tool round
    included. A client already metered is left as it is. Returns how many clients were wrapped.
    """
    wrapped = 0
    seen: set[int] = set()
    todo: list[object] = [root]
    while todo:
        holder = todo.pop()
        if id(holder) in seen:
            continue
        seen.add(id(holder))
        for name, value in list(getattr(holder, "__dict__", {}).items()):
            if isinstance(value, ChatCompletionClient):
                if not isinstance(value, MeteredChatCompletionClient):
                    setattr(holder, name, metered(value))
                    wrapped += 1
            elif isinstance(value, ChatAgent | Team):
                todo.append(value)
            elif isinstance(value, list | tuple):
                todo.extend(item for item in value if isinstance(item, ChatAgent | Team))
    return wrapped


def _tokens(response: Response) -> int:
    messages: Sequence[BaseAgentEvent | BaseChatMessage] = [
        *(response.inner_messages or ()),
        response.chat_message,
    ]
    return sum(
        m.models_usage.prompt_tokens + m.models_usage.completion_tokens
        for m in messages
        if m.models_usage is not None
    )


def _one_line(message: BaseAgentEvent | BaseChatMessage) -> str:
    text = " ".join(message.to_text().split())
    if len(text) > MAX_THOUGHT_CHARS:
        text = text[: MAX_THOUGHT_CHARS - 1] + "…"
    return f"{message.source} {type(message).__name__}: {text}"
