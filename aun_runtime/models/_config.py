"""`ModelConfig`: which model the agents talk to, as plain values, read from the environment.

Every pattern takes either a ready `ChatCompletionClient` or a [`ModelConfig`][aun_runtime.models.ModelConfig]; a config is
plain data, so it can be handed to a worker process, which builds its own client from it. Nothing is
imported or fetched until [`ModelConfig.build`][aun_runtime.models.ModelConfig.build] is called.

Environment variables (read by [`ModelConfig.from_env`][aun_runtime.models.ModelConfig.from_env]):

| variable | meaning |
|---|---|
| `AUN_MODEL` | model name for an OpenAI-compatible server (vLLM, Ollama, a hosted API). Setting it switches every pattern from the cassette to that model. |
| `AUN_MODEL_BASE_URL` | the server's base URL, e.g. `http://localhost:11434/v1` (Ollama) or `http://localhost:8000/v1` (vLLM). Default: the OpenAI API. |
| `AUN_MODEL_API_KEY` | the API key (default: `OPENAI_API_KEY`; local servers accept any). |
| `AUN_MODEL_FAMILY` | model family for autogen (default `unknown`). |
| `AUN_MODEL_JSON_OUTPUT` | `1`/`0`: the server supports JSON mode (default `1`). |
| `AUN_MODEL_FUNCTION_CALLING` | `1`/`0`: the server supports tool calls (default `1`). |
| `AUN_MODEL_STRUCTURED_OUTPUT` | `1`/`0`: the server supports JSON-schema output (default `0`). |
| `AUN_MODEL_TEMPERATURE` | sampling temperature passed to every request (default: the server's). |
| `AUN_MODEL_TIMEOUT` | seconds one HTTP request to the model may take (default `120`). |
| `AUN_MODEL_RETRIES` | how many times one call's request is sent again after a 429, a 5xx, a timeout or a dropped connection (default `30`). |
| `AUN_MODEL_PATIENCE` | seconds one call may wait at its endpoint's limiter and retry (default `240`; inside a turn, the handler timeout bounds it too). |
| `AUN_MODEL_CONCURRENCY` | model calls in flight at once per endpoint in this process (default `8`). |
| `AUN_MODEL_BACKOFF` | seconds of the first wait after a failure without `Retry-After`, doubled per failure (default `0.5`). |
| `AUN_MODEL_MAX_BACKOFF` | the longest such wait, in seconds (default `30`). |
| `AUN_MODEL_CLIENT` | `module:factory`: any `ChatCompletionClient` factory instead of the OpenAI-compatible client (takes precedence over `AUN_MODEL`). |
| `AUN_MODEL_RECORD` | `1`: record the live model's answers into the cassette as they come. |
| `AUN_MODEL_CASSETTE` | a cassette path that overrides the one the code names. |

With none of `AUN_MODEL` / `AUN_MODEL_CLIENT` set, the client replays the cassette: offline and
deterministic.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from autogen_core.models import ChatCompletionClient, ModelInfo

from ._cassette_client import CassetteChatCompletionClient
from ._errors import ModelConfigError
from ._limited import LimitedChatCompletionClient, observe_response

__all__ = [
    "DEFAULT_MODEL_BACKOFF",
    "DEFAULT_MODEL_CONCURRENCY",
    "DEFAULT_MODEL_MAX_BACKOFF",
    "DEFAULT_MODEL_PATIENCE",
    "DEFAULT_MODEL_RETRIES",
    "DEFAULT_MODEL_TIMEOUT",
    "ModelConfig",
    "ModelSource",
    "model_client_from_env",
    "resolve_model",
]

#: Seconds one HTTP request to a live model may take before the client gives up on it. A chat
#: completion of a few thousand tokens takes seconds to a minute on a hosted model, and a large
#: local model or a reasoning model can take a couple of minutes for one; two minutes covers that,
#: where the OpenAI client's own default (ten minutes) would hold a turn past its handler timeout.
DEFAULT_MODEL_TIMEOUT = 120.0
#: How many times one call's request is sent again after a timeout, a connection error, a 429 or a
#: 5xx. The endpoint's limiter spaces the tries (the server's `Retry-After`, else a backoff shared by
#: every agent), so the count is a backstop: :data:`DEFAULT_MODEL_PATIENCE` ends a long outage
#: first (thirty tries at `Retry-After: 2` take a minute; at the backoff cap, fifteen).
DEFAULT_MODEL_RETRIES = 30
#: Seconds one call may wait at its endpoint (for a slot, for the gate, retrying) before it gives up
#: with a transient error, which retries the turn. Four minutes rides out the rate-limit storms of
#: hosted APIs (tens of seconds to a couple of minutes) and stays inside the default handler
#: timeout (five), which bounds it anyway.
DEFAULT_MODEL_PATIENCE = 240.0
#: Model calls in flight at once per endpoint in one process. A local server (vLLM, Ollama) serves a
#: handful of requests at a time and queues the rest; a hosted API's per-minute limits are what
#: throttle, not concurrency. Eight keeps a fan-out of many agents from opening a storm at once and
#: still keeps a local server busy.
DEFAULT_MODEL_CONCURRENCY = 8
#: Seconds of the first wait after a failure that came without `Retry-After` (a 5xx, a timeout, a
#: dropped connection), doubled per failure in a row: half a second rides out a blip.
DEFAULT_MODEL_BACKOFF = 0.5
#: The longest wait without `Retry-After`: an endpoint that is down is probed every half minute.
DEFAULT_MODEL_MAX_BACKOFF = 30.0

ModelSource = Literal["cassette", "openai", "factory"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class ModelConfig:
    """Where answers come from, in plain values.

    Attributes:
        source: `cassette` (replay a file), `openai` (an OpenAI-compatible server) or `factory`
            (any client made by `module:function`).
        cassette: the cassette file (replayed; or recorded into when `record`).
        record: record the live model's answers into `cassette`.
        model: model name (`openai`).
        base_url: server base URL (`openai`); `None` means the OpenAI API.
        api_key_env: the *name* of the variable that holds the key, so that a config can be handed to
            another process without carrying the secret.
        factory: `module:function` returning a `ChatCompletionClient` (`factory`).
        model_info: capabilities of the live model.
        temperature: sampling temperature, if set.
        timeout: seconds one HTTP request to the live model may take (`openai`).
        max_retries: how many times one call's request is sent again after a transient failure (`openai`).
        patience: seconds one call may wait and retry at its endpoint (`openai`).
        max_concurrent: calls in flight at once per endpoint in this process (`openai`).
        backoff: seconds of the first wait after a failure without `Retry-After` (`openai`).
        max_backoff: the longest such wait (`openai`).
    """

    source: ModelSource = "cassette"
    cassette: str | None = None
    record: bool = False
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "AUN_MODEL_API_KEY"
    factory: str | None = None
    model_info: dict[str, Any] = field(default_factory=dict)
    temperature: float | None = None
    timeout: float = DEFAULT_MODEL_TIMEOUT
    max_retries: int = DEFAULT_MODEL_RETRIES
    patience: float = DEFAULT_MODEL_PATIENCE
    max_concurrent: int = DEFAULT_MODEL_CONCURRENCY
    backoff: float = DEFAULT_MODEL_BACKOFF
    max_backoff: float = DEFAULT_MODEL_MAX_BACKOFF

    def __post_init__(self) -> None:
        for name in ("timeout", "patience", "backoff", "max_backoff"):
            if not getattr(self, name) > 0:
                raise ModelConfigError(f"a model {name} is a positive number of seconds (got {getattr(self, name)!r})")
        if self.max_retries < 0:
            raise ModelConfigError(f"max_retries cannot be negative (got {self.max_retries!r})")
        if self.max_concurrent < 1:
            raise ModelConfigError(f"max_concurrent must be at least 1 (got {self.max_concurrent!r})")

    @classmethod
    def from_env(
        cls, *, cassette: str | Path | None = None, environ: Mapping[str, str] | None = None
    ) -> ModelConfig:
        """Read the configuration from environment variables (see the module docstring).

        Args:
            cassette: the cassette this program replays offline (`AUN_MODEL_CASSETTE` overrides it).
            environ: the variables to read (default: `os.environ`).

        Raises:
            ModelConfigError: a variable has a value that cannot be used (the message names it).
        """
        env = os.environ if environ is None else environ
        cassette_path = env.get("AUN_MODEL_CASSETTE") or (str(cassette) if cassette is not None else None)
        record = _flag(env, "AUN_MODEL_RECORD", False)
        factory = env.get("AUN_MODEL_CLIENT") or None
        model = env.get("AUN_MODEL") or None
        temperature = _float(env, "AUN_MODEL_TEMPERATURE")
        timeout = _float(env, "AUN_MODEL_TIMEOUT")
        retries = _whole(env, "AUN_MODEL_RETRIES")
        concurrency = _whole(env, "AUN_MODEL_CONCURRENCY")
        patience = _float(env, "AUN_MODEL_PATIENCE")
        backoff = _float(env, "AUN_MODEL_BACKOFF")
        max_backoff = _float(env, "AUN_MODEL_MAX_BACKOFF")
        if factory is not None:
            config = cls(source="factory", factory=factory, cassette=cassette_path, record=record)
        elif model is not None:
            api_key_env = "AUN_MODEL_API_KEY" if env.get("AUN_MODEL_API_KEY") else "OPENAI_API_KEY"
            info = {
                "vision": False,
                "function_calling": _flag(env, "AUN_MODEL_FUNCTION_CALLING", True),
                "json_output": _flag(env, "AUN_MODEL_JSON_OUTPUT", True),
                "structured_output": _flag(env, "AUN_MODEL_STRUCTURED_OUTPUT", False),
                "family": env.get("AUN_MODEL_FAMILY") or "unknown",
                "multiple_system_messages": True,
            }
            config = cls(
                source="openai",
                model=model,
                base_url=env.get("AUN_MODEL_BASE_URL") or None,
                api_key_env=api_key_env,
                model_info=info,
                temperature=temperature,
                cassette=cassette_path,
                record=record,
                timeout=DEFAULT_MODEL_TIMEOUT if timeout is None else timeout,
                max_retries=DEFAULT_MODEL_RETRIES if retries is None else retries,
                patience=DEFAULT_MODEL_PATIENCE if patience is None else patience,
                max_concurrent=DEFAULT_MODEL_CONCURRENCY if concurrency is None else concurrency,
                backoff=DEFAULT_MODEL_BACKOFF if backoff is None else backoff,
                max_backoff=DEFAULT_MODEL_MAX_BACKOFF if max_backoff is None else max_backoff,
            )
        else:
            if record:
                raise ModelConfigError(
                    "AUN_MODEL_RECORD=1 needs a live model to record from: set AUN_MODEL (and "
                    "AUN_MODEL_BASE_URL, AUN_MODEL_API_KEY) or AUN_MODEL_CLIENT=module:factory"
                )
            config = cls(source="cassette", cassette=cassette_path)
        if config.record and config.cassette is None:
            raise ModelConfigError(
                "AUN_MODEL_RECORD=1 needs a cassette path to record into (AUN_MODEL_CASSETTE)"
            )
        return config

    def with_cassette(self, cassette: str | Path) -> ModelConfig:
        """The same configuration with another cassette file."""
        return replace(self, cassette=str(cassette))

    def describe(self) -> str:
        """One line saying where answers come from (no secrets)."""
        if self.source == "cassette":
            return f"replaying cassette {self.cassette} (offline, deterministic)"
        live = (
            f"model {self.model!r} at {self.base_url or 'the OpenAI API'}"
            if self.source == "openai"
            else f"client from {self.factory}"
        )
        return live + (f", recording into {self.cassette}" if self.record else "")

    def build(self, environ: Mapping[str, str] | None = None) -> ChatCompletionClient:
        """Make the client. Imports what the source needs only now.

        Raises:
            ModelConfigError: the source cannot be built (missing cassette path, optional dependency
                not installed, factory not importable).
            CassetteFileError: the cassette file is missing or damaged (replay only).
        """
        if self.source == "cassette":
            if self.cassette is None:
                raise ModelConfigError(
                    "no model configured: set AUN_MODEL (with AUN_MODEL_BASE_URL and AUN_MODEL_API_KEY) "
                    "for an OpenAI-compatible server, AUN_MODEL_CLIENT=module:factory, or give a cassette"
                )
            return CassetteChatCompletionClient(self.cassette)
        live = self._build_live(os.environ if environ is None else environ)
        if self.record:
            assert self.cassette is not None  # from_env checked it
            return CassetteChatCompletionClient(self.cassette, record_from=live)
        return live

    def _build_live(self, env: Mapping[str, str]) -> ChatCompletionClient:
        if self.source == "factory":
            return _call_factory(self.factory or "")
        try:
            from autogen_ext.models.openai import OpenAIChatCompletionClient
        except ImportError as exc:
            raise ModelConfigError(
                f"AUN_MODEL is set but the OpenAI-compatible client is not installed ({exc}): "
                "pip install 'aun-runtime[openai]'"
            ) from None
        import httpx

        kwargs: dict[str, Any] = {
            "model": self.model,
            "api_key": env.get(self.api_key_env) or "not-needed",
            "model_info": ModelInfo(**self.model_info),  # type: ignore[typeddict-item]
            # Every request is bounded: a model that never answers costs a turn at most this, never the agent.
            "timeout": self.timeout,
            # The endpoint's limiter retries, for all agents at once; the client's own retries would
            # retry each agent on its own clock.
            "max_retries": 0,
            # Every answer's headers reach the limiter (x-ratelimit-* on a success, too).
            "http_client": httpx.AsyncClient(
                timeout=self.timeout, event_hooks={"response": [observe_response]}
            ),
        }
        if self.base_url:
            kwargs["base_url"] = self.base_url
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        return LimitedChatCompletionClient(
            OpenAIChatCompletionClient(**kwargs),
            base_url=self.base_url or "https://api.openai.com/v1",
            model=self.model or "",
            max_concurrent=self.max_concurrent,
            backoff=self.backoff,
            max_backoff=self.max_backoff,
            patience=self.patience,
            max_retries=self.max_retries,
        )


def model_client_from_env(
    cassette: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> ChatCompletionClient:
    """The client the environment asks for, replaying `cassette` when no model is configured.

    Example:
        ```python
        model = model_client_from_env("cassettes/reflection.json")
        # offline: replays the cassette; with AUN_MODEL=... set: talks to that model
        ```
    """
    return ModelConfig.from_env(cassette=cassette, environ=environ).build(environ)


def resolve_model(model: ChatCompletionClient | ModelConfig) -> ChatCompletionClient:
    """A client from a client (as is) or a config (built now): what agent constructors accept."""
    if isinstance(model, ModelConfig):
        return model.build()
    if not isinstance(model, ChatCompletionClient):
        raise ModelConfigError(
            f"expected a ChatCompletionClient or a ModelConfig, got {type(model).__name__}"
        )
    return model


def _call_factory(spec: str) -> ChatCompletionClient:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ModelConfigError(f"AUN_MODEL_CLIENT must be module:function, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelConfigError(f"AUN_MODEL_CLIENT: cannot import {module_name!r}: {exc}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ModelConfigError(f"AUN_MODEL_CLIENT: {module_name} has no callable {attribute!r}")
    client = factory()
    if not isinstance(client, ChatCompletionClient):
        raise ModelConfigError(
            f"AUN_MODEL_CLIENT: {spec} returned {type(client).__name__}, not a ChatCompletionClient"
        )
    return client


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ModelConfigError(f"{name}={value!r}: use 1 or 0")


def _float(env: Mapping[str, str], name: str) -> float | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    try:
        return float(value)
    except ValueError:
        raise ModelConfigError(f"{name}={value!r} is not a number") from None


def _whole(env: Mapping[str, str], name: str) -> int | None:
    value = _float(env, name)
    if value is not None and not value.is_integer():
        raise ModelConfigError(f"{name}={env[name]!r} is not a whole number")
    return None if value is None else int(value)
