"""What every model-using agent needs: a client from config, names the model API accepts, plain text out."""

from __future__ import annotations

import re

from autogen_core.models import ChatCompletionClient, CreateResult

from aun_runtime.models import ModelConfig, metered, resolve_model

__all__ = ["ModelLike", "result_text", "speaker_name", "use_model"]

#: What an agent constructor accepts as its model: a client, or a config it builds its own client from
#: (plain values, so a worker process can be handed one).
ModelLike = ChatCompletionClient | ModelConfig

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def use_model(model: ModelLike) -> ChatCompletionClient:
    """The client for `model` (built now from a config, or used as it is), metered: each call the
    agent makes spends its model budgets, and a call past them is refused before it is made."""
    return metered(resolve_model(model))


def speaker_name(aid: str) -> str:
    """An AID as a message `source` the OpenAI API accepts (letters, digits, `_` and `-`)."""
    return _NAME_CHARS.sub("_", aid)[:64]


def result_text(result: CreateResult) -> str:
    """The text of a completion; a completion that is only tool calls has none."""
    if isinstance(result.content, str):
        return result.content
    raise ValueError(
        f"the model answered with {len(result.content)} tool call(s) where text was expected; "
        "this agent offers no tools"
    )
