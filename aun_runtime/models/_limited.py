"""`LimitedChatCompletionClient`: a live model client that waits its turn at its endpoint's limiter.

[`ModelConfig.build`][aun_runtime.models.ModelConfig.build] wraps every OpenAI-compatible client in
it (the OpenAI client's own retries are turned off: they would retry each agent on its own clock).
Each call:

1. waits at the endpoint's [`EndpointLimiter`][aun_runtime.models.EndpointLimiter] for a slot and an
   open gate; the agent's turn shows it as waiting for `model limiter`;
2. sends the request (the turn shows `model`); a 429, a 5xx, a timeout or a dropped connection
   closes the gate for every agent (for the server's `Retry-After`, else a backoff) and the call
   waits again, up to `max_retries` times;
3. an answer the client cannot read (no `choices`) is a **model anomaly**: recorded, and asked
   again up to `answer_retries` times, then [`ModelAnswerError`][aun_runtime.models.ModelAnswerError].

**Waiting is not failing, but it is bounded**: by `patience` seconds, and, inside a turn, by the
turn's handler timeout (less a second, so that the turn ends with the model's error, which is
transient and retried, rather than being cut off). Past that the call raises
[`ModelUnavailableError`][aun_runtime.models.ModelUnavailableError], naming the endpoint and its last failure.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from autogen_core import CancellationToken
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
)
from autogen_core.tools import Tool, ToolSchema

from ..delivery._acting import ACTING, INBOUND
from ._errors import ModelAnswerError, ModelUnavailableError
from ._limiter import EndpointLimiter, limiter_for, retry_after_of
from ._request import JsonOutput, ToolChoice
from ._wrapped import WrappedChatCompletionClient

__all__ = ["DEFAULT_ANSWER_RETRIES", "LimitedChatCompletionClient", "observe_response"]

#: How many times an answer the client cannot read is asked for again: a server that sends one
#: broken body usually sends a good one next; one that keeps doing it is broken for now, and the
#: turn is better retried later than hammered.
DEFAULT_ANSWER_RETRIES = 2
#: Seconds kept free before a turn's handler timeout: the call gives up this much earlier, so that
#: the turn ends with the model's (transient) error rather than being cut off.
TURN_MARGIN = 1.0

# The headers of the last HTTP response of the call running in this task (set by the HTTP client's
# response hook, read after the call): how a successful answer's x-ratelimit-* reaches the limiter.
_LAST_HEADERS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("aun_model_headers", default=None)


async def observe_response(response: Any) -> None:
    """The HTTP client's response hook: keep the headers for the call that made the request."""
    holder = _LAST_HEADERS.get()
    if holder is not None:
        holder.clear()
        holder.update(response.headers)


def _transient(exc: BaseException) -> tuple[float | None, str] | None:
    """(the wait the server asked for, what failed) if `exc` is the endpoint's passing trouble."""
    try:
        import openai
    except ImportError:  # pragma: no cover - the limited client is built only with the openai extra
        openai = None  # type: ignore[assignment]
    if openai is not None:
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status == 429 or status == 408 or status >= 500:
                return retry_after_of(exc.response.headers), f"HTTP {status}"
            return None
        if isinstance(exc, openai.APITimeoutError):
            return None, "timed out"
        if isinstance(exc, openai.APIConnectionError):
            return None, f"connection failed ({exc.__cause__ or exc})"
    if isinstance(exc, TimeoutError | ConnectionError):
        return None, f"{type(exc).__name__}: {exc}"
    return None


def _unreadable(exc: BaseException) -> bool:
    """An answer that parsed as HTTP but is not a completion (autogen indexes `choices[0]`)."""
    return isinstance(exc, IndexError | KeyError | AttributeError) or type(exc).__name__ == "ValidationError"


def _show(what: str | None) -> None:
    agent = ACTING.get()
    if agent is not None:
        turn = agent.aun.turns.current()
        if turn is not None:
            turn.wait_for(what)


def _anomaly(detail: str) -> None:
    agent = ACTING.get()
    if agent is not None:
        agent.aun.record_model_anomaly(agent.aid, detail, INBOUND.get())


class LimitedChatCompletionClient(WrappedChatCompletionClient):
    """`inner` (a live client that does not retry), behind the limiter of its endpoint.

    Args:
        inner: the client that sends the requests.
        base_url: the endpoint's base URL; with `model`, the limiter's key.
        model: the model name.
        max_concurrent: calls in flight at once at the endpoint (the limiter's first user's count).
        backoff: seconds of the first wait after a failure without `Retry-After`.
        max_backoff: the longest such wait.
        patience: seconds one call may wait and retry before it gives up.
        max_retries: requests sent again after a transient failure, at most.
        answer_retries: requests sent again after an answer that cannot be read.
    """

    def __init__(
        self,
        inner: ChatCompletionClient,
        *,
        base_url: str,
        model: str,
        max_concurrent: int,
        backoff: float,
        max_backoff: float,
        patience: float,
        max_retries: int,
        answer_retries: int = DEFAULT_ANSWER_RETRIES,
    ) -> None:
        super().__init__(inner)
        self.base_url = base_url
        self.model = model
        self.max_concurrent = max_concurrent
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.patience = patience
        self.max_retries = max_retries
        self.answer_retries = answer_retries

    @property
    def limiter(self) -> EndpointLimiter:
        """The limiter of this client's endpoint in the running loop."""
        return limiter_for(
            self.base_url, self.model,
            max_concurrent=self.max_concurrent, backoff=self.backoff, max_backoff=self.max_backoff,
        )

    def _deadline(self, now: float) -> float:
        deadline = now + self.patience
        agent = ACTING.get()
        turn = agent.aun.turns.current() if agent is not None else None
        if turn is not None:
            deadline = min(deadline, turn.deadline - TURN_MARGIN)
        return deadline

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
        limiter = self.limiter
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = self._deadline(started)
        retries = unreadable = 0
        headers: dict[str, str] = {}
        holder = _LAST_HEADERS.set(headers)
        try:
            while True:
                _show("model limiter")
                if not await limiter.acquire(deadline):
                    raise ModelUnavailableError(
                        f"model {limiter.endpoint} gave no answer in {loop.time() - started:.1f} s "
                        f"({retries} retries; last: {limiter.last_failure or 'none'}): it is rate-limited or down; "
                        "the turn is retried later (AUN_MODEL_PATIENCE and the handler timeout bound the wait)"
                    )
                _show("model")
                try:
                    result = await self.inner.create(
                        messages,
                        tools=tools,
                        tool_choice=tool_choice,
                        json_output=json_output,
                        extra_create_args=extra_create_args,
                        cancellation_token=cancellation_token,
                    )
                except Exception as exc:
                    failure = _transient(exc)
                    if failure is None:
                        limiter.release(failed=False)
                        if not _unreadable(exc):
                            raise
                        unreadable += 1
                        _anomaly(f"an answer that is not a completion ({type(exc).__name__}: {exc})")
                        if unreadable > self.answer_retries:
                            raise ModelAnswerError(
                                f"model {limiter.endpoint} answered {unreadable} times with something that is "
                                f"not a completion (last: {type(exc).__name__}: {exc})"
                            ) from exc
                        continue
                    retry_after, what = failure
                    limiter.release(failed=True, retry_after=retry_after, what=what)
                    retries += 1
                    agent = ACTING.get()
                    if agent is not None:
                        agent.aun.stats.model_retries += 1
                    if retries > self.max_retries:
                        raise ModelUnavailableError(
                            f"model {limiter.endpoint} failed {retries} times (last: {what}); "
                            "the turn is retried later (AUN_MODEL_RETRIES bounds the requests of one call)"
                        ) from exc
                    continue
                except BaseException:
                    limiter.release(failed=False, cancelled=True)  # a turn cut off: the slot is free again
                    raise
                limiter.release(failed=False, retry_after=retry_after_of(headers, exhausted_only=True))
                return result
        finally:
            _show(None)
            _LAST_HEADERS.reset(holder)

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
        """Streams through the limiter's slots and gate; a stream is not retried once it began
        (what it yielded is already out), so it fails as the inner client's stream does."""
        limiter = self.limiter
        deadline = self._deadline(asyncio.get_running_loop().time())
        _show("model limiter")
        if not await limiter.acquire(deadline):
            raise ModelUnavailableError(f"model {limiter.endpoint} is rate-limited or down (last: {limiter.last_failure})")
        _show("model")
        failed: tuple[float | None, str] | None = None
        try:
            async for item in self.inner.create_stream(
                messages,
                tools=tools,
                tool_choice=tool_choice,
                json_output=json_output,
                extra_create_args=extra_create_args,
                cancellation_token=cancellation_token,
            ):
                yield item
        except Exception as exc:
            failed = _transient(exc)
            if failed is not None:
                raise ModelUnavailableError(f"model {limiter.endpoint}: {failed[1]}") from exc
            raise
        finally:
            _show(None)
            if failed is None:
                limiter.release(failed=False)
            else:
                limiter.release(failed=True, retry_after=failed[0], what=failed[1])
