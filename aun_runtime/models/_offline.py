"""`OfflineChatCompletionClient`: the shared base of the clients that answer without a network.

A subclass implements [`OfflineChatCompletionClient.answer`][aun_runtime.models.OfflineChatCompletionClient.answer], which maps a
[`ModelRequest`][aun_runtime.models.ModelRequest] to a result (and, optionally, the chunks a stream yields).
The base turns that into autogen-core's `create` and `create_stream`, keeps the usage counters,
and records every request it was asked in `OfflineChatCompletionClient.requests`, so that a
test can count model calls.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from autogen_core import CancellationToken
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,  # pyright: ignore[reportDeprecated]
    ModelInfo,
    RequestUsage,
)
from autogen_core.tools import Tool, ToolSchema

from ._request import JsonOutput, ModelRequest, ToolChoice, canonical_json

__all__ = ["OfflineChatCompletionClient"]

#: The context window an offline client claims. Nothing is truncated offline; this only answers
#: ``remaining_tokens`` with a plausible number.
OFFLINE_TOKEN_LIMIT = 128_000
#: Rough characters per token, to count tokens without a tokenizer (and without downloading one).
_CHARS_PER_TOKEN = 4


class OfflineChatCompletionClient(ChatCompletionClient):
    """A `ChatCompletionClient` whose answers come from code or a file, never from a network."""

    def __init__(self, model_info: ModelInfo) -> None:
        self._model_info = model_info
        self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self._actual = RequestUsage(prompt_tokens=0, completion_tokens=0)
        #: Every request asked so far, in call order (tests count and inspect them).
        self.requests: list[ModelRequest] = []

    @abstractmethod
    async def answer(self, request: ModelRequest, *, stream: bool) -> tuple[CreateResult, list[str] | None]:
        """The result for `request` and, if it should stream in set pieces, its chunks.

        `stream` says whether the caller asked for a stream (a recording client records one then).
        """

    async def _respond(
        self,
        messages: Sequence[LLMMessage],
        tools: Sequence[Tool | ToolSchema],
        tool_choice: ToolChoice,
        json_output: JsonOutput,
        extra_create_args: Mapping[str, Any],
        stream: bool,
    ) -> tuple[CreateResult, list[str] | None]:
        request = ModelRequest.build(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
        )
        self.requests.append(request)
        # Yield once, as a real client would: concurrent callers interleave here, and answers must
        # not depend on who got through first.
        await asyncio.sleep(0)
        result, chunks = await self.answer(request, stream=stream)
        usage = result.usage
        self._actual = RequestUsage(
            self._actual.prompt_tokens + usage.prompt_tokens,
            self._actual.completion_tokens + usage.completion_tokens,
        )
        self._total = RequestUsage(
            self._total.prompt_tokens + usage.prompt_tokens,
            self._total.completion_tokens + usage.completion_tokens,
        )
        return result, chunks

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
        result, _ = await self._respond(messages, tools, tool_choice, json_output, extra_create_args, False)
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
        result, chunks = await self._respond(
            messages, tools, tool_choice, json_output, extra_create_args, True
        )
        if chunks is None:
            chunks = [result.content] if isinstance(result.content, str) and result.content else []
        for chunk in chunks:
            yield chunk
            await asyncio.sleep(0)
        yield result

    async def close(self) -> None:
        """Nothing to release."""

    def actual_usage(self) -> RequestUsage:
        return self._actual

    def total_usage(self) -> RequestUsage:
        return self._total

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        request = ModelRequest.build(messages, tools=tools)
        return len(canonical_json(request.data)) // _CHARS_PER_TOKEN

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        return OFFLINE_TOKEN_LIMIT - self.count_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> ModelCapabilities:  # pyright: ignore[reportDeprecated]
        return {
            "vision": self._model_info["vision"],
            "function_calling": self._model_info["function_calling"],
            "json_output": self._model_info["json_output"],
        }

    @property
    def model_info(self) -> ModelInfo:
        return self._model_info
