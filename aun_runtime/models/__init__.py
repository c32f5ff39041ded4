"""Model clients for the agents: any autogen-core ``ChatCompletionClient`` plugs in.

* :class:`CassetteChatCompletionClient` answers from a :class:`Cassette`, keyed by the *content* of
  each request (never by call order), and records what it lacks when given a live client.
* :class:`ScriptedChatCompletionClient` answers with a function of the request: a deterministic
  stand-in model for tests and demos.
* :class:`MeteredChatCompletionClient` (:func:`metered`) counts each call an agent makes against
  its model budgets and refuses calls past them (see :class:`~aun_runtime.Budgets`).
* :class:`ModelConfig` / :func:`model_client_from_env` pick the source from environment variables:
  an OpenAI-compatible server (vLLM, Ollama, a hosted API; the ``openai`` extra) when ``AUN_MODEL`` is
  set, else the cassette, offline.

Nothing here touches the network or imports an optional dependency at import time.
"""

from ._cassette import CASSETTE_FORMAT, DEFAULT_MODEL_INFO, Cassette, CassetteEntry
from ._cassette_client import CassetteChatCompletionClient
from ._config import (
    DEFAULT_MODEL_RETRIES,
    DEFAULT_MODEL_TIMEOUT,
    ModelConfig,
    ModelSource,
    model_client_from_env,
    resolve_model,
)
from ._errors import CassetteFileError, CassetteMissError, ModelConfigError
from ._metered import MeteredChatCompletionClient, metered
from ._offline import OfflineChatCompletionClient
from ._request import ModelRequest, canonical_json
from ._scripted import Answer, Responder, ScriptedChatCompletionClient, function_calls

__all__ = [
    "CASSETTE_FORMAT",
    "DEFAULT_MODEL_INFO",
    "DEFAULT_MODEL_RETRIES",
    "DEFAULT_MODEL_TIMEOUT",
    "Answer",
    "Cassette",
    "CassetteChatCompletionClient",
    "CassetteEntry",
    "CassetteFileError",
    "CassetteMissError",
    "MeteredChatCompletionClient",
    "ModelConfig",
    "ModelConfigError",
    "ModelRequest",
    "ModelSource",
    "OfflineChatCompletionClient",
    "Responder",
    "ScriptedChatCompletionClient",
    "canonical_json",
    "function_calls",
    "metered",
    "model_client_from_env",
    "resolve_model",
]
