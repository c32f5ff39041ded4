"""`MeteredChatCompletionClient`: a model client that spends the calling agent's budgets.

Wrap any `ChatCompletionClient` in it and every call made from an agent's handler (or proactive
action) is counted against that agent's model budgets in its runtime's
[`BudgetLedger`][aun_runtime.BudgetLedger]: calls and tokens per thread, and per sliding window. A call past a
budget is refused *before* anything is asked of the model: it raises
[`ModelBudgetExceeded`][aun_runtime.ModelBudgetExceeded], which is recorded as a budget stop; the handler ends there,
with no dead letter. Tokens are what the client reports in `CreateResult.usage`.

An answer with neither text nor tool calls is taken as it is (silence), and recorded as a
`model_anomaly` of the agent.

A call made outside any agent (a script, a test) is passed through uncounted. Every model-backed
agent in `agents/` wraps its client this way, so the same budgets hold for all of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from autogen_core import CancellationToken
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    RequestUsage,
)
from autogen_core.tools import Tool, ToolSchema
from opentelemetry.trace import Span

from ..base._budgets import ModelCall
from ..base._errors import ModelBudgetExceeded
from ..delivery._acting import ACTING, INBOUND, Actor
from ._call_stats import MODEL_CALLS, model_name
from ._model_spans import end_model_span, start_model_span
from ._request import JsonOutput, ToolChoice
from ._wrapped import WrappedChatCompletionClient

__all__ = ["MeteredChatCompletionClient", "metered"]


class MeteredChatCompletionClient(WrappedChatCompletionClient):
    """`inner`, with each call from an agent counted against that agent's model budgets.

    Args:
        inner: the client that answers.

    Example:
        >>> from aun_runtime.models import ScriptedChatCompletionClient
        >>> model = metered(ScriptedChatCompletionClient(lambda request: "hi"))
        >>> metered(model) is model  # wrapping twice would count twice
        True
    """

    def __init__(self, inner: ChatCompletionClient) -> None:
        super().__init__(inner)
        #: The model's name, as `/metrics` and the model-call spans show it.
        self.model = model_name(inner)

    def _open(self) -> tuple[tuple[Actor, str | None, ModelCall] | None, float, Span]:
        """Begin a call: its meter (a refusal is counted, then raised), its start time and its span."""
        try:
            meter = self._begin()
        except ModelBudgetExceeded:
            MODEL_CALLS.record(self.model, "refused", None)
            raise
        return meter, time.monotonic(), start_model_span(self.model)

    def _close(self, started: float, span: Span, usage: RequestUsage | None, error: BaseException | None) -> None:
        end_model_span(span, usage, error)
        if error is None or isinstance(error, GeneratorExit):  # a stream its reader stopped early still answered
            outcome = "ok"
        else:
            outcome = "cancelled" if isinstance(error, asyncio.CancelledError) else "error"
        MODEL_CALLS.record(self.model, outcome, time.monotonic() - started, usage)

    def _begin(self) -> tuple[Actor, str | None, ModelCall] | None:
        agent = ACTING.get()  # set only while an attached agent acts
        if agent is None:
            return None
        inbound = INBOUND.get()
        thread = (inbound.thread or inbound.message_id) if inbound is not None else None
        runtime = agent.aun
        refusal = runtime.ledger.model_call_refusal(agent.aid, thread)
        if refusal is not None:
            error = ModelBudgetExceeded(refusal)
            runtime.record_budget_stop(agent.aid, error, inbound)
            raise error
        return agent, thread, runtime.ledger.begin_model_call(agent.aid, thread)

    @staticmethod
    def _end(meter: tuple[Actor, str | None, ModelCall] | None, usage: RequestUsage | None) -> None:
        if meter is None:
            return
        agent, thread, call = meter
        tokens = (usage.prompt_tokens + usage.completion_tokens) if usage is not None else 0
        agent.aun.ledger.end_model_call(agent.aid, thread, call, tokens)

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: ToolChoice = "auto",
        json_output: JsonOutput = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        meter, started, span = self._open()
        try:
            result = await self.inner.create(
                messages,
                tools=tools,
                tool_choice=tool_choice,
                json_output=json_output,
                extra_create_args=extra_create_args,
                cancellation_token=cancellation_token,
            )
        except BaseException as exc:
            self._close(started, span, None, exc)
            raise
        self._end(meter, result.usage)
        self._close(started, span, result.usage, None)
        if meter is not None and isinstance(result.content, str) and not result.content.strip() and not result.thought:
            agent, _, _ = meter
            agent.aun.record_model_anomaly(agent.aid, "an answer with neither text nor tool calls", INBOUND.get())
        return result

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: ToolChoice = "auto",
        json_output: JsonOutput = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        meter, started, span = self._open()
        failure: BaseException | None = None
        stream = self.inner.create_stream(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )
        usage: RequestUsage | None = None
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    usage = item.usage
                yield item
        except BaseException as exc:
            failure = exc
            raise
        finally:
            # A stream cut short (an observer stops a silent answer early) still used what it used;
            # a client reports usage only with its last item, so an early stop counts the call only.
            await stream.aclose()
            self._end(meter, usage)
            self._close(started, span, usage, failure)


def metered(client: ChatCompletionClient) -> MeteredChatCompletionClient:
    """`client` wrapped in a [`MeteredChatCompletionClient`][aun_runtime.models.MeteredChatCompletionClient] (once: a metered one is returned as is)."""
    return client if isinstance(client, MeteredChatCompletionClient) else MeteredChatCompletionClient(client)
