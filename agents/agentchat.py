"""`AgentChatAgent`: any autogen-agentchat `ChatAgent` as an AUN agent, in one line.

An agentchat agent (an `AssistantAgent` with its model client, tools and memory, a `UserProxyAgent`
for a person, or any other `ChatAgent`) answers every batch of messages it is handed. On the AUN
wire that is still an autonomous agent: it decides what to say, and the adapter decides, from what
it said, whether anything is sent at all.

* Each message from someone else that has text becomes an agentchat `TextMessage` (its `source`
  is the sender's AID made safe as a name) and goes to the chat agent, which keeps its own memory
  of the conversation. The agent's own messages (a gateway may echo them back) and
  `tool_call`/`tool_result` payloads (they describe the sender's own tool use) cost no model call.
* The response's `chat_message` is sent with [`reply`][aun_runtime.AUNAgent.reply], naming the
  sender in a `mention` group so that they see it. An answer that is empty, blank, or starts with
  the silence marker (`__SILENT__`) is silence: the decision is archived as a thought.
* **Speaking beyond the reply**: a chat agent given [`send_tools`][agents.agentchat.send_tools]
  (the autonomous agent's `send_message` and `post_to_group`) may send to any AID or post to a
  group during its turn, as this agent and in the thread of the message it handles: the hop guard,
  the budgets and the archive hold for each message. The final answer is still the reply; in
  agentchat's summary of tool results (`reflect_on_tool_use=False`) the send tools' lines are left
  out, so a turn that only sent something replies nothing more.
* The response's inner messages (tool calls and results, thoughts, memory queries) are archived as
  thoughts, one line each. Each use of the chat agent's own tools is also shown to the
  conversation as `tool_call` / `tool_result` messages, as the autonomous agent shows its own
  (`annotate_tools=False` turns that off); a send tool's use is the message it sent.
* **A person through a `UserProxyAgent`**: the person is asked through the proxy's `input_func`,
  with the message in the prompt (`alice.local: Deploy now?`, then agentchat's
  `Enter your response: `), for at most `input_timeout` seconds (`DEFAULT_INPUT_TIMEOUT`, four
  minutes); no answer by then is silence. agentchat's default input, the terminal, is read so that
  a line typed after a wait was given up on answers the next message, and the program's end never
  waits for a line. The turn is still bounded by the runtime's handler timeout.
* The runtime's budgets hold for it as for every agent ([`Budgets`][aun_runtime.Budgets]): when no
  answer could go out (a thread it overheard and already spoke in), the chat agent is not asked.
  **Every model call is metered**: the adapter wraps each model client the chat agent holds (and
  those of the agents and teams it holds, such as a `SocietyOfMindAgent`'s) in a
  [`MeteredChatCompletionClient`][aun_runtime.models.MeteredChatCompletionClient], so a turn of an
  `AssistantAgent` that calls its tools forty times spends forty calls of the budget, not one; the
  call past a budget is refused before it is made (a budget stop) and ends the turn.
* [`AgentChatAgent.save_state`][agents.agentchat.AgentChatAgent.save_state] wraps the chat agent's
  own state, so its memory survives idle eviction and, with `SQLiteStateStore`, a restart.

agentchat is an optional dependency (`pip install aun-runtime[agentchat]`); only this module and
its companion that reads a turn's response import it.

Example:
    ```python
    from autogen_agentchat.agents import AssistantAgent, UserProxyAgent

    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            "assistant.local",
            from_agentchat(lambda: AssistantAgent("assistant", model_client=client, tools=send_tools())),
        )
        await runtime.register_agent("oncall.local", from_agentchat(lambda: UserProxyAgent("oncall")))
        inbox = await runtime.open_inbox()
        await inbox.send("assistant.local", "Ask oncall.local when the last backup ran.")
    ```
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from autogen_agentchat.agents import UserProxyAgent
from autogen_agentchat.base import ChatAgent, Response, Team
from autogen_agentchat.messages import ModelClientStreamingChunkEvent, TextMessage
from autogen_core import CancellationToken
from autogen_core.models import ChatCompletionClient
from autogen_core.tools import BaseTool

from aun_runtime import (
    DEFAULT_TURN_RETRY,
    AUNAgent,
    AUNError,
    AUNMessage,
    BudgetExceeded,
    MessageContext,
    TransientError,
    TurnRetry,
    event,
)
from aun_runtime.models import MeteredChatCompletionClient, metered
from protocols.aun import ToolCallPayload, ToolResultPayload

from ._agentchat_response import answer_text, one_line, sent_only, tokens, tool_use
from ._model_calls import speaker_name
from ._person_input import TERMINAL, InputEnded, InputFunction, ask
from ._send_tools import (
    POST_TO_GROUP,
    SEND_MESSAGE,
    SendTool,
    SendToolOutsideATurnError,
    send_tool_schemas,
    show_tool_use,
    speaking_as,
)
from .human import DEFAULT_ANSWER_TIMEOUT

__all__ = [
    "DEFAULT_INPUT_TIMEOUT",
    "DEFAULT_SILENCE_MARKER",
    "PERSON_PROMPT",
    "AgentChatAgent",
    "ChatAgentSource",
    "NotAChatAgentError",
    "SendToolOutsideATurnError",
    "from_agentchat",
    "meter_model_clients",
    "send_tools",
]

#: An answer that starts with this is the chat agent choosing to say nothing.
DEFAULT_SILENCE_MARKER = "__SILENT__"
#: Seconds a person may take over one message: as long as a `HumanAgent` waits (see
#: `agents.human.DEFAULT_ANSWER_TIMEOUT` for why).
DEFAULT_INPUT_TIMEOUT = DEFAULT_ANSWER_TIMEOUT
#: What a person is asked after the message is shown: agentchat's own words for it.
PERSON_PROMPT = "Enter your response: "

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
        annotate_tools: show each use of the chat agent's own tools to the conversation as
            `tool_call` / `tool_result` messages from this agent.
        input_timeout: for a `UserProxyAgent`, seconds the person may take over one message before
            saying nothing (the handler timeout bounds the whole turn as well).

    Example:
        ```python
        await runtime.register_agent(
            "assistant.local",
            lambda: AgentChatAgent(lambda: AssistantAgent("assistant", model_client=client)),
        )
        ```
    """

    def __init__(
        self,
        chat_agent: ChatAgentSource,
        *,
        silence_marker: str = DEFAULT_SILENCE_MARKER,
        annotate_tools: bool = True,
        input_timeout: float = DEFAULT_INPUT_TIMEOUT,
    ) -> None:
        agent = _checked_chat_agent(chat_agent if isinstance(chat_agent, ChatAgent) else chat_agent())
        if not input_timeout > 0:
            raise ValueError("input_timeout is a positive number of seconds")
        super().__init__(agent.description)
        meter_model_clients(agent)
        self.chat_agent = agent
        self.silence_marker = silence_marker
        self.annotate_tools = annotate_tools
        self.input_timeout = input_timeout
        #: For a UserProxyAgent, the function the person answers through.
        self.person_input: InputFunction | None = agent.input_func if isinstance(agent, UserProxyAgent) else None
        #: The person's input has ended: nobody is asked any more.
        self.person_gone = False
        #: Model tokens (prompt + completion) the chat agent reported using, and turns it was asked for.
        self.tokens_used = 0
        self.model_turns = 0

    #: A turn whose model failed for a passing cause is tried again, as `AutonomousAgent`'s are; the
    #: chat agent's memory is put back first (see `_take_turn`). None: a retryable dead letter at once.
    turn_retry: TurnRetry | None = DEFAULT_TURN_RETRY

    # Not `on_message`: that name would override autogen-core's BaseAgent.on_message, which the
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
        if self.person_input is not None:
            answer = await self._ask_person(message, text, self.person_input)
        else:
            answer = await self._take_turn(message, text)
        if answer is None:
            return
        if not answer.strip():
            self.think(f"silent on {message.from_aid}'s message: {self.chat_agent.name} gave an empty answer")
            return
        if answer.lstrip().startswith(self.silence_marker):
            why = answer.lstrip()[len(self.silence_marker) :].strip()
            self.think(f"silent on {message.from_aid}'s message" + (f": {why}" if why else ""))
            return
        await self.reply(answer)  # in a mention group, reply() names the one being answered

    async def _take_turn(self, message: AUNMessage, text: str) -> str | None:
        """One turn of the chat agent on `message`: its answer, or None if the turn ended without one."""
        self.model_turns += 1
        incoming = [TextMessage(content=text, source=speaker_name(message.from_aid))]
        response: Response | None = None
        # The chat agent adds the message to its memory before it asks its model: a second try of
        # the turn would add it twice, so a failed try leaves the memory as it found it.
        before = await self.chat_agent.save_state() if self.turn_retry is not None else None
        try:
            # Each model call the turn makes (one per tool round) spends the budgets on its own, and
            # the send tools it calls speak as this agent.
            with speaking_as(self):
                async for item in self.chat_agent.on_messages_stream(incoming, CancellationToken()):
                    if isinstance(item, Response):
                        response = item
                    elif not isinstance(item, ModelClientStreamingChunkEvent):  # a token, not a message
                        self.think(one_line(item))
                        if self.annotate_tools:
                            for payload in tool_use(item):
                                await show_tool_use(self, message, payload)
        except BudgetExceeded as exc:  # recorded as a budget stop by the call that was refused
            self.think(f"the turn on {message.from_aid}'s message ended at a budget: {exc.reason}")
            return None
        except TransientError:
            if before is not None:
                await self.chat_agent.load_state(before)
            raise
        if response is None:
            self.think(f"{self.chat_agent.name} ended its turn on {message.from_aid}'s message with no response")
            return None
        self.tokens_used += tokens(response)
        sent_with = sent_only(response.chat_message)
        if sent_with:
            self.think(f"no reply to {message.from_aid}'s message: it spoke with {', '.join(sent_with)}")
            return None
        return answer_text(response.chat_message)

    async def _ask_person(self, message: AUNMessage, text: str, person: InputFunction) -> str | None:
        """The person's answer to `message`, or None if none came (in time, or any more)."""
        if self.person_gone:
            self.think(f"not asking about {message.from_aid}'s message: the person's input has ended")
            return None
        where = f"#{message.group_id} " if message.group_id else ""
        prompt = f"{where}{message.from_aid}: {text}\n{PERSON_PROMPT}"
        try:
            if _reads_the_terminal(person):
                answer = await TERMINAL.ask(prompt, timeout=self.input_timeout)
            else:
                answer = await ask(person, prompt, timeout=self.input_timeout)
        except InputEnded:
            self.person_gone = True
            self.think(f"silent on {message.from_aid}'s message: the person's input has ended")
            return None
        if answer is None:
            self.think(
                f"silent on {message.from_aid}'s message: no answer from the person within "
                f"{self.input_timeout:g} s (input_timeout)"
            )
        return answer

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
    factory: ChatAgentSource,
    *,
    silence_marker: str = DEFAULT_SILENCE_MARKER,
    annotate_tools: bool = True,
    input_timeout: float = DEFAULT_INPUT_TIMEOUT,
) -> Callable[[], AgentChatAgent]:
    """A factory for [`AUNRuntime.register_agent`][aun_runtime.AUNRuntime.register_agent] that
    runs the chat agent `factory` makes as an AUN agent.

    Args:
        factory: a zero-argument callable returning an agentchat `ChatAgent` (called once now, to
            check what it makes, and once per instance after the first), or a chat agent (see
            [`AgentChatAgent`][agents.agentchat.AgentChatAgent]).
        silence_marker: an answer starting with this is silence.
        annotate_tools: show the chat agent's own tool use to the conversation.
        input_timeout: for a `UserProxyAgent`, seconds the person may take over one message.

    Raises:
        NotAChatAgentError: the factory makes no chat agent (a team: the message says what to do).

    Example:
        ```python
        await runtime.register_agent(
            "assistant.local", from_agentchat(lambda: AssistantAgent("assistant", model_client=client))
        )
        await runtime.register_agent("person.local", from_agentchat(lambda: UserProxyAgent("person")))
        ```
    """

    # Made once now, so that what is not a chat agent (a team) is refused at registration, not at
    # the first message; the agent made now serves the first instance.
    made = [] if isinstance(factory, ChatAgent) else [_checked_chat_agent(factory())]

    def make() -> AgentChatAgent:
        return AgentChatAgent(
            made.pop() if made else factory, silence_marker=silence_marker, annotate_tools=annotate_tools,
            input_timeout=input_timeout,
        )

    return make


class NotAChatAgentError(AUNError, TypeError):
    """What `from_agentchat` was given makes no agentchat `ChatAgent` (a team, for one)."""


def _checked_chat_agent(made: object) -> ChatAgent:
    """`made` if it is an agentchat `ChatAgent`.

    Raises:
        NotAChatAgentError: it is not; for a team, the message says what to do instead.
    """
    if isinstance(made, ChatAgent):
        return made
    if isinstance(made, Team):
        raise NotAChatAgentError(
            f"from_agentchat takes one chat agent, and the factory made a team ({type(made).__name__}). "
            "Register each of its agents as an AUN agent (from_agentchat(lambda: AssistantAgent(...)) for each) "
            "and put them in an AUN group (runtime.create_group), or wrap the team in one chat agent: "
            "from_agentchat(lambda: SocietyOfMindAgent('team', team=..., model_client=...))"
        )
    raise NotAChatAgentError(f"the factory made a {type(made).__name__}, not an agentchat ChatAgent")


def send_tools() -> list[BaseTool[Any, Any]]:
    """The send tools to give a chat agent's model, so that it may speak beyond its reply.

    `send_message(to, text)` sends a direct message to any AID, `post_to_group(group_id, text,
    mentions)` posts to a group the agent is in: the same tools, with the same descriptions, as an
    [`AutonomousAgent`][agents.autonomous.AutonomousAgent]'s model has. They run only inside a turn of
    an [`AgentChatAgent`][agents.agentchat.AgentChatAgent], and send as
    it: in the thread of the message being handled, through its own send tools, so that the hop
    guard, the budgets and the archive hold for each message. A send that fails (an unknown AID, a
    budget stop) is an error result the model reads; one run outside such a turn raises
    [`SendToolOutsideATurnError`][agents.agentchat.SendToolOutsideATurnError].

    Example:
        >>> [tool.name for tool in send_tools()]
        ['send_message', 'post_to_group']
    """
    return [
        SendTool(schema)
        for schema in send_tool_schemas(follow_ups=False)
        if schema["name"] in (SEND_MESSAGE, POST_TO_GROUP)
    ]


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


#: agentchat's default input function (the terminal, read in a thread of the event loop's executor).
_AGENTCHAT_INPUT = UserProxyAgent("probe").input_func


def _reads_the_terminal(input_func: InputFunction) -> bool:
    """True for agentchat's default input and plain `input`: the adapter reads the terminal itself,
    so that no wait it gave up on keeps a line, or the program's end, for good."""
    return input_func is input or input_func is _AGENTCHAT_INPUT
