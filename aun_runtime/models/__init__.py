"""Model clients for the agents: any autogen-core `ChatCompletionClient` plugs in.

* [`CassetteChatCompletionClient`][aun_runtime.models.CassetteChatCompletionClient] answers from a [`Cassette`][aun_runtime.models.Cassette], keyed by the *content* of
  each request (never by call order), and records what it lacks when given a live client.
* [`ScriptedChatCompletionClient`][aun_runtime.models.ScriptedChatCompletionClient] answers with a function of the request: a deterministic
  stand-in model for tests and demos.
* [`MeteredChatCompletionClient`][aun_runtime.models.MeteredChatCompletionClient] ([`metered`][aun_runtime.models.metered]) counts each call an agent makes against
  its model budgets and refuses calls past them (see [`Budgets`][aun_runtime.Budgets]), counts it
  for `/metrics` and traces it as an OpenTelemetry GenAI span; [`tool_span`][aun_runtime.models.tool_span]
  traces a local tool call the same way.
* [`LimitedChatCompletionClient`][aun_runtime.models.LimitedChatCompletionClient]: how every live client calls its endpoint, through
  the [`EndpointLimiter`][aun_runtime.models.EndpointLimiter] shared by every agent of the process (Retry-After, backoff, a cap).
* [`ModelConfig`][aun_runtime.models.ModelConfig] / [`model_client_from_env`][aun_runtime.models.model_client_from_env] pick the source from environment variables:
  an OpenAI-compatible server (vLLM, Ollama, a hosted API; the `openai` extra) when `AUN_MODEL` is
  set, else the cassette, offline.

Nothing here touches the network or imports an optional dependency at import time.
"""

from ._cassette import CASSETTE_FORMAT, DEFAULT_MODEL_INFO, Cassette, CassetteEntry
from ._cassette_client import CassetteChatCompletionClient
from ._config import (
    DEFAULT_MODEL_BACKOFF,
    DEFAULT_MODEL_CONCURRENCY,
    DEFAULT_MODEL_MAX_BACKOFF,
    DEFAULT_MODEL_PATIENCE,
    DEFAULT_MODEL_RETRIES,
    DEFAULT_MODEL_TIMEOUT,
    ModelConfig,
    ModelSource,
    model_client_from_env,
    resolve_model,
)
from ._errors import (
    CassetteFileError,
    CassetteMissError,
    ModelAnswerError,
    ModelConfigError,
    ModelUnavailableError,
)
from ._limited import DEFAULT_ANSWER_RETRIES, LimitedChatCompletionClient
from ._limiter import EndpointLimiter, LimiterStats, limiter_for
from ._metered import MeteredChatCompletionClient, metered
from ._model_spans import tool_span
from ._offline import OfflineChatCompletionClient
from ._request import ModelRequest, canonical_json
from ._scripted import Answer, Responder, ScriptedChatCompletionClient, function_calls

__all__ = [
    "CASSETTE_FORMAT",
    "DEFAULT_ANSWER_RETRIES",
    "DEFAULT_MODEL_BACKOFF",
    "DEFAULT_MODEL_CONCURRENCY",
    "DEFAULT_MODEL_INFO",
    "DEFAULT_MODEL_MAX_BACKOFF",
    "DEFAULT_MODEL_PATIENCE",
    "DEFAULT_MODEL_RETRIES",
    "DEFAULT_MODEL_TIMEOUT",
    "Answer",
    "Cassette",
    "CassetteChatCompletionClient",
    "CassetteEntry",
    "CassetteFileError",
    "CassetteMissError",
    "EndpointLimiter",
    "LimitedChatCompletionClient",
    "LimiterStats",
    "MeteredChatCompletionClient",
    "ModelAnswerError",
    "ModelConfig",
    "ModelConfigError",
    "ModelRequest",
    "ModelSource",
    "ModelUnavailableError",
    "OfflineChatCompletionClient",
    "Responder",
    "ScriptedChatCompletionClient",
    "canonical_json",
    "function_calls",
    "limiter_for",
    "metered",
    "model_client_from_env",
    "resolve_model",
    "tool_span",
]
