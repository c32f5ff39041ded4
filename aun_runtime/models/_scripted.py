"""`ScriptedChatCompletionClient`: a stand-in model that answers with a function of the request.

The function sees the whole [`ModelRequest`][aun_runtime.models.ModelRequest] and returns the answer, so the
answer depends on *what* is asked and never on call order: concurrent agents get the same answers
however their calls interleave. It is the deterministic stand-in for a model in tests, in the demo,
and when a cassette is authored offline (wrap it in a recording
[`CassetteChatCompletionClient`][aun_runtime.models.CassetteChatCompletionClient]).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from autogen_core import FunctionCall
from autogen_core.models import CreateResult, ModelInfo, RequestUsage

from ._cassette import DEFAULT_MODEL_INFO
from ._offline import OfflineChatCompletionClient
from ._request import ModelRequest

__all__ = ["Answer", "Responder", "ScriptedChatCompletionClient", "function_calls"]

#: A text answer, the chunks of a streamed text answer, or a full result (e.g. with function calls).
Answer = str | Sequence[str] | CreateResult
Responder = Callable[[ModelRequest], Answer | Awaitable[Answer]]


class ScriptedChatCompletionClient(OfflineChatCompletionClient):
    """Answers each request with `respond(request)`.

    Args:
        respond: a function (or coroutine function) of the request. A string is the answer; a list of
            strings is a streamed answer in those chunks; a `CreateResult` is returned as is.
        model_info: the capabilities to claim (default: text, JSON mode and function calling).

    Example:
        >>> client = ScriptedChatCompletionClient(lambda request: f"you said {request.last_text}")
    """

    def __init__(self, respond: Responder, *, model_info: ModelInfo | None = None) -> None:
        super().__init__(model_info or dict(DEFAULT_MODEL_INFO))  # type: ignore[arg-type]
        self._respond_with = respond

    async def answer(self, request: ModelRequest, *, stream: bool) -> tuple[CreateResult, list[str] | None]:
        produced = self._respond_with(request)
        answer = await produced if inspect.isawaitable(produced) else produced
        return as_result(answer, request)


def as_result(answer: Answer, request: ModelRequest) -> tuple[CreateResult, list[str] | None]:
    """Turn an `Answer` into a result with plausible token counts (and chunks, if streamed)."""
    if isinstance(answer, CreateResult):
        return answer, None
    chunks = [answer] if isinstance(answer, str) else [str(chunk) for chunk in answer]
    text = "".join(chunks)
    prompt = sum(len(str(m.content)) for m in request.messages) // 4
    usage = RequestUsage(prompt_tokens=prompt, completion_tokens=len(text) // 4)
    result = CreateResult(finish_reason="stop", content=text, usage=usage, cached=False)
    return result, (chunks if not isinstance(answer, str) else None)


def function_calls(*calls: tuple[str, Mapping[str, Any]], id_prefix: str = "call") -> CreateResult:
    """A result that calls tools, `(name, arguments)` each: how a scripted model speaks through an
    agent's send tools (`reply`, `send_message`...) or uses its local tools.

    Call ids are `<id_prefix>-1`, `<id_prefix>-2`...; arguments are written with sorted keys, so
    the same calls make the same request afterwards (content-keyed cassettes depend on it).

    Example:
        >>> result = function_calls(("reply", {"text": "hi"}), ("reply", {"text": "again"}))
        >>> [(call.id, call.name, call.arguments) for call in result.content]
        [('call-1', 'reply', '{"text": "hi"}'), ('call-2', 'reply', '{"text": "again"}')]
    """
    content = [
        FunctionCall(id=f"{id_prefix}-{n}", name=name, arguments=json.dumps(dict(arguments), sort_keys=True))
        for n, (name, arguments) in enumerate(calls, start=1)
    ]
    completion = sum(len(call.arguments) for call in content) // 4
    usage = RequestUsage(prompt_tokens=0, completion_tokens=completion)
    return CreateResult(finish_reason="function_calls", content=content, usage=usage, cached=False)
