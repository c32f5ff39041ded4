"""`AutonomousAgent`: a model-backed AUN agent whose model thinks, and speaks only through send tools.

This is AUN's autonomous mode at the model layer. Each message the agent's channel delivers enters
the model's context, and what the model then writes is the agent's **internal thinking**: archived
as thoughts, never sent. The agent says something only when the model **calls a send tool**:

* `reply`: answer the message being handled (in its group, or to its sender; in a `mention`
  group the sender is mentioned, so that the asker sees it);
* `send_message`: a direct message to any AID;
* `post_to_group`: a post to a group, with structured mentions;
* `follow_up`: wake itself later, with no inbound message, to continue the conversation (a
  proactive turn, in the same thread, so its budgets still hold).

Zero calls is silence; several calls are several messages. The model's own **local tools** (any
autogen-core `Tool`, or a `Workbench`, such as autogen-ext's `McpWorkbench` for MCP servers) run
here, inside the agent. Each use is shown to the conversation as `tool_call` / `tool_result`
payloads from the agent itself: annotations for viewers, never requests to anyone (a receiver runs
nothing, and a model-backed receiver spends no model call on them).

An answer that is not one (tool arguments that do not parse, a tool that does not exist) is fed back
to the model as an error result, as a model can correct itself, and recorded as a `model_anomaly`.

The code keeps the cost bounded, whatever the model does:

* a message from the agent itself, or a tool annotation from anyone, costs no model call;
* when no answer could go out (the thread is full, or the agent overheard it and already spoke
  there), no model call is made: the message waits in the archive as context for a later turn;
* one turn makes at most `max_rounds` model calls (a round ends the turn unless the model used a
  local tool, whose result it must see);
* each local tool call (and each listing of a workbench's tools) gets `tool_timeout` seconds: one
  that hangs is cancelled, the model sees an error result that says it timed out, and so does the
  conversation (the `tool_result` annotation, `ok` false); the turn itself is bounded by the
  runtime's handler timeout, and each model call by its client's own timeout;
* every call spends the agent's model budgets ([`Budgets`][aun_runtime.Budgets]): past one, the call is
  refused and recorded as a budget stop.

The context is read from the archive on every turn (each record the agent lived through becomes
one line, the newest kept), within a token budget: it survives idle eviction and a restart on the
same archive file. Follow-ups that are still waiting keep the instance in memory (an agent with scheduled actions is not evicted); a process that
stops forgets them.

A model without function calling cannot speak this way: it is refused at construction, and
[`ObserverAgent`][agents.observer.ObserverAgent] (the marker protocol, `__SILENT__`) is the agent for it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import BaseTool, ToolSchema, Workbench

from aun_runtime import (
    DEFAULT_TURN_RETRY,
    AUNAgent,
    AUNMessage,
    MessageContext,
    TurnRetry,
    event,
)
from aun_runtime.models import ModelConfig
from protocols.aun import ToolCallPayload, ToolResultPayload
from protocols.errors import AUNError

from ._context import CONTEXT_KINDS, addressing, context_lines, describe, where
from ._local_tools import DEFAULT_TOOL_TIMEOUT, LocalTools
from ._model_calls import ModelLike, speaker_name, use_model
from ._send_tools import (
    FOLLOW_UP,
    SEND_TOOL_NAMES,
    ToolArgumentError,
    send_tool_schemas,
    show_tool_use,
    speak,
    string_argument,
)

__all__ = [
    "DEFAULT_CONTEXT_RECORDS",
    "DEFAULT_CONTEXT_TOKENS",
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_TOOL_TIMEOUT",
    "MAX_FOLLOW_UP_DELAY",
    "AutonomousAgent",
    "FunctionCallingRequiredError",
]

#: The token budget of the context read from the archive (estimated at four characters a token).
DEFAULT_CONTEXT_TOKENS = 4_000
#: How many archive records are read for the context before the token budget trims them.
DEFAULT_CONTEXT_RECORDS = 60
#: Model calls one turn may make: the first, and more only while the model uses local tools.
DEFAULT_MAX_ROUNDS = 4
#: The longest a follow-up may be put off, in seconds (a day): a later one is a tool error.
MAX_FOLLOW_UP_DELAY = 86_400.0


class FunctionCallingRequiredError(AUNError, ValueError):
    """The model cannot call functions, and an autonomous agent speaks only by calling send tools."""


def _system_prompt(aid: str, instructions: str, *, local_tools: bool) -> str:
    tools = (
        " You also have tools of your own; using one shows the conversation that you used it."
        if local_tools
        else ""
    )
    return (
        f"You are {aid}, an autonomous agent on a network of agents (AUN). Messages arrive to you; "
        "you owe nobody an answer. Whatever you write as text is your private thinking: nobody ever "
        "sees it. To say something, call a send tool: reply, send_message or post_to_group. Call none "
        "to stay silent (often the right choice when a message is not for you), or several to say "
        f"several things. You may schedule a follow_up to come back to a conversation later.{tools}"
        + (f"\n\n{instructions.strip()}" if instructions.strip() else "")
    )


class AutonomousAgent(AUNAgent):
    """A model-backed agent in AUN's autonomous mode: it thinks in text and speaks through send tools.

    Args:
        model: a `ChatCompletionClient` with function calling, or a
            [`ModelConfig`][aun_runtime.models.ModelConfig] to build one from.
        instructions: who the agent is and what it does, added to its system prompt.
        tools: its local tools: autogen-core tools, or a `Workbench` (for example an MCP server's).
            The agent never starts or stops a workbench it is given (it may be shared, and an
            evicted instance is made again with the same one): whoever made it closes it
            (`async with McpWorkbench(...)`, or `await workbench.stop()` after the runtime closes).
        annotate_tools: show each local tool use to the conversation as `tool_call` /
            `tool_result` messages from this agent.
        follow_ups: how many follow-ups may wait at once (0: the tool is not offered).
        context_tokens: the token budget of the context read from the archive.
        context_records: how many archive records are read before the token budget trims them.
        max_rounds: model calls one turn may make.
        tool_timeout: seconds one local tool call may take before it is cancelled (None: no limit
            of its own; the turn's handler timeout still holds).
        turn_retry: how a turn that failed for a passing cause (its model rate-limited or down) is
            tried again before its message is a retryable dead letter (None: not tried again).
        description: one line for metadata and consoles.

    Raises:
        FunctionCallingRequiredError: the model has no function calling.

    Example:
        >>> from aun_runtime.models import ScriptedChatCompletionClient
        >>> agent = AutonomousAgent(ScriptedChatCompletionClient(lambda r: "nothing to say"), instructions="You review SQL.")
        >>> [schema["name"] for schema in agent.send_tools]
        ['reply', 'send_message', 'post_to_group', 'follow_up']
    """

    def __init__(
        self,
        model: ModelLike,
        *,
        instructions: str = "",
        tools: Sequence[BaseTool[Any, Any]] | Workbench | None = None,
        annotate_tools: bool = True,
        follow_ups: int = 1,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        context_records: int = DEFAULT_CONTEXT_RECORDS,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        turn_retry: TurnRetry | None = DEFAULT_TURN_RETRY,
        description: str = "a model-backed agent that thinks, and speaks through its send tools",
    ) -> None:
        super().__init__(description)
        self.model = use_model(model)
        self.turn_retry = turn_retry
        if not self.model.model_info.get("function_calling", False):
            source = model.describe() if isinstance(model, ModelConfig) else type(model).__name__
            raise FunctionCallingRequiredError(
                f"{source} has no function calling, and an AutonomousAgent speaks only by calling send "
                "tools. Use agents.observer.ObserverAgent for this model: it speaks by markers "
                "(__SILENT__ / __REPLY__) in plain text"
            )
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if not isinstance(tools, Workbench):
            clash = sorted(SEND_TOOL_NAMES.intersection(tool.name for tool in tools or ()))
            if clash:
                raise ValueError(f"local tools may not be named like the send tools: {', '.join(clash)}")
        self.local_tools = LocalTools.of(tools, timeout=tool_timeout)
        self.workbench: Workbench | None = self.local_tools.workbench if self.local_tools else None
        self.instructions = instructions
        self.annotate_tools = annotate_tools
        self.follow_ups = follow_ups
        self.context_tokens = context_tokens
        self.context_records = context_records
        self.max_rounds = max_rounds
        #: The send tools offered to the model.
        self.send_tools = send_tool_schemas(follow_ups=follow_ups > 0)
        #: Model calls made so far by this instance, and the last request's messages (for inspection).
        self.model_calls = 0
        self.last_request: list[LLMMessage] = []
        self._pending_follow_ups = 0
        # Handler turns take their messages one at a time already; a follow-up turn waits its turn too.
        self._turn = asyncio.Lock()

    # -- what starts a turn ------------------------------------------------------------------------

    @event
    async def on_arrival(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.from_aid == self.aid:
            return  # its own message, echoed back by a gateway: never an occasion to speak
        if isinstance(message.payload, ToolCallPayload | ToolResultPayload):
            return  # another agent's annotation: context for the next turn, not a question
        refusal = self.aun.ledger.reply_refusal(self.aid, message)
        if refusal is not None:  # no answer could go out: no model call, the message waits as context
            self.think(f"not taking a turn on {message.from_aid}'s message: {refusal}")
            return
        prompt = (
            f"New message from {message.from_aid} ({where(message, self.aid)}, "
            f"{addressing(message, self.aid)}):\n{describe(message)}"
        )
        async with self._turn:
            await self._take_turn(prompt, message)

    async def _follow_up(self, about: AUNMessage, note: str) -> None:
        try:
            with self.acting_on(about):
                prompt = (
                    f"Your follow-up is due (you scheduled it while handling {about.from_aid}'s message in "
                    f"{where(about, self.aid)}). Your note: {note}"
                )
                async with self._turn:
                    await self._take_turn(prompt, about)
        finally:
            self._pending_follow_ups -= 1

    # -- one turn ----------------------------------------------------------------------------------

    async def _take_turn(self, prompt: str, about: AUNMessage) -> None:
        tools = [*self.send_tools, *(await self._local_tool_schemas())]
        messages: list[LLMMessage] = [
            SystemMessage(
                content=_system_prompt(self.aid, self.instructions, local_tools=self.workbench is not None)
            ),
            *self._memory(about),
            UserMessage(content=prompt, source=speaker_name(about.from_aid)),
        ]
        for _ in range(self.max_rounds):
            self.last_request = list(messages)
            result = await self.model.create(messages, tools=tools)
            self.model_calls += 1  # counted once made: a call its budget refused was never made
            if result.thought:
                self.think(result.thought)
            if isinstance(result.content, str):
                if result.content.strip():
                    self.think(result.content)
                return
            outcomes: list[FunctionExecutionResult] = []
            needs_another_look = False
            for call in result.content:
                try:
                    arguments = json.loads(call.arguments or "{}")
                    if not isinstance(arguments, dict):
                        raise ToolArgumentError("the arguments must be a JSON object")
                except (json.JSONDecodeError, ToolArgumentError) as exc:
                    self.aun.record_model_anomaly(
                        self.aid, f"tool call {call.name!r} with arguments that are not a JSON object ({exc})", about
                    )
                    outcomes.append(
                        FunctionExecutionResult(
                            content=f"bad arguments: {exc}", name=call.name, call_id=call.id, is_error=True
                        )
                    )
                    needs_another_look = True
                    continue
                if call.name in SEND_TOOL_NAMES:
                    text, failed, correctable = await self._speak(call.name, arguments)
                    needs_another_look = needs_another_look or correctable
                else:
                    text, failed = await self._use_local_tool(call.id, call.name, arguments, about)
                    needs_another_look = True  # it asked for a result: it should see it
                outcomes.append(
                    FunctionExecutionResult(content=text, name=call.name, call_id=call.id, is_error=failed)
                )
            if not needs_another_look:
                return  # it said what it meant to say: nothing new for it to think about
            messages += [
                AssistantMessage(
                    content=result.content, source=speaker_name(self.aid), thought=result.thought
                ),
                FunctionExecutionResultMessage(content=outcomes),
            ]
        self.think(f"ended the turn after {self.max_rounds} model calls (max_rounds)")

    def _memory(self, about: AUNMessage) -> list[LLMMessage]:
        records = self.history(kinds=CONTEXT_KINDS, limit=self.context_records)
        lines = context_lines(records, self.aid, token_budget=self.context_tokens, leave_out=about)
        if not lines:
            return []
        return [
            UserMessage(
                content="What you have seen so far (oldest first):\n" + "\n".join(lines), source="archive"
            )
        ]

    # -- the send tools ----------------------------------------------------------------------------

    async def _speak(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool, bool]:
        """Run one send tool: what the model is told, whether it failed, and whether the model could
        do better if asked again (a wrong AID could be corrected; a budget stop could not)."""
        if name != FOLLOW_UP:
            return await speak(self, name, arguments)
        try:
            return self._schedule_follow_up(arguments)
        except ToolArgumentError as exc:
            return f"not sent: {exc}", True, True

    def _schedule_follow_up(self, arguments: dict[str, Any]) -> tuple[str, bool, bool]:
        inbound = self.inbound
        assert inbound is not None
        delay = arguments.get("after_seconds")
        if not isinstance(delay, int | float) or not 0 <= delay <= MAX_FOLLOW_UP_DELAY:
            raise ToolArgumentError(f"'after_seconds' must be a number from 0 to {MAX_FOLLOW_UP_DELAY:g}")
        note = string_argument(arguments, "note")
        if self._pending_follow_ups >= self.follow_ups:
            return (
                f"not scheduled: {self._pending_follow_ups} follow-up(s) already waiting (the limit)",
                True,
                False,
            )
        self._pending_follow_ups += 1
        self.schedule(lambda: self._follow_up(inbound, note), delay=float(delay))
        return f"follow-up scheduled in {delay:g} s", False, False

    # -- local tools -------------------------------------------------------------------------------

    async def _local_tool_schemas(self) -> list[ToolSchema]:
        if self.local_tools is None:
            return []

        def offered(schema: ToolSchema) -> bool:
            if schema["name"] in SEND_TOOL_NAMES:
                self.think(f"not offering the workbench tool {schema['name']}: a send tool has that name")
                return False
            return True

        return await self.local_tools.schemas(offered)

    async def _use_local_tool(
        self, call_id: str, name: str, arguments: dict[str, Any], about: AUNMessage
    ) -> tuple[str, bool]:
        """Run a local tool, announcing the call and its outcome to the conversation."""
        known = {schema["name"] for schema in await self._local_tool_schemas()}
        if self.local_tools is None or name not in known:
            self.aun.record_model_anomaly(self.aid, f"a call of a tool that does not exist: {name!r}", about)
            return f"there is no tool named {name!r}", True
        await self._annotate(about, ToolCallPayload(call_id=call_id, name=name, arguments=arguments))
        turn = self.aun.turns.current()
        if turn is not None:
            turn.wait_for("tool")  # shown by runtime.busy(): the turn waits for its tool
        try:
            text, failed = await self.local_tools.call(name, arguments, call_id)
        finally:
            if turn is not None:
                turn.wait_for(None)
        outcome = (
            ToolResultPayload(call_id=call_id, ok=False, error=text)
            if failed
            else ToolResultPayload(call_id=call_id, ok=True, result=text)
        )
        await self._annotate(about, outcome)
        return text, failed

    async def _annotate(self, about: AUNMessage, payload: ToolCallPayload | ToolResultPayload) -> None:
        if self.annotate_tools:
            await show_tool_use(self, about, payload)
