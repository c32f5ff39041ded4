"""`WrappedChatCompletionClient`: a model client that adds one rule to another's calls and is that
client in every other respect.

The runtime wraps a model client twice over: the limiter (how this process waits its turn at an
endpoint) and the meter (what the calling agent's budgets allow). Each overrides `create` and
`create_stream`; everything else (usage, token counts, capabilities, the component it was built
from, closing) is the inner client's, written here once.
"""

from __future__ import annotations

from collections.abc import Sequence

from autogen_core import ComponentModel
from autogen_core.models import (
    ChatCompletionClient,
    LLMMessage,
    ModelCapabilities,  # pyright: ignore[reportDeprecated]
    ModelInfo,
    RequestUsage,
)
from autogen_core.tools import Tool, ToolSchema

__all__ = ["WrappedChatCompletionClient"]


class WrappedChatCompletionClient(ChatCompletionClient):
    """`inner`, passed through: a subclass says what its `create` and `create_stream` add.

    Args:
        inner: the client that answers.
    """

    def __init__(self, inner: ChatCompletionClient) -> None:
        self.inner = inner

    async def close(self) -> None:
        await self.inner.close()

    def dump_component(self) -> ComponentModel:
        """The inner client's component: the wrapping is how this runtime calls it, not part of it."""
        return self.inner.dump_component()

    def actual_usage(self) -> RequestUsage:
        return self.inner.actual_usage()

    def total_usage(self) -> RequestUsage:
        return self.inner.total_usage()

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return self.inner.count_tokens(messages, tools=tools)

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        return self.inner.remaining_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> ModelCapabilities:  # pyright: ignore[reportDeprecated]
        return self.inner.capabilities  # pyright: ignore[reportDeprecated]

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info
