"""`ModelCallStats`: the model calls of this process, counted by model and outcome, for `/metrics`.

Every model call an agent makes goes through [`MeteredChatCompletionClient`][aun_runtime.models.MeteredChatCompletionClient], which counts it
here: calls by `(model, outcome)`, tokens by `(model, direction)` and each call's duration. The
labels are few by design: a model name is one of the few a process talks to, and an outcome one of
`OUTCOMES`; no AID or thread becomes a label.
"""

from __future__ import annotations

import warnings

from autogen_core.models import ChatCompletionClient, RequestUsage

from ..base._histogram import MODEL_CALL_BUCKETS, DurationHistogram

__all__ = ["MODEL_CALLS", "OUTCOMES", "ModelCallStats", "model_name"]

#: How a model call ended: answered, raised (the model or its client failed), cancelled (the turn
#: was cut off or the runtime stopped), or refused by a budget before anything was asked.
OUTCOMES = ("ok", "error", "cancelled", "refused")


class ModelCallStats:
    """Counters of model calls, process-wide (every runtime of the process shares its models)."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], int] = {}
        self.tokens: dict[tuple[str, str], int] = {}
        self.durations: dict[str, DurationHistogram] = {}

    def record(self, model: str, outcome: str, seconds: float | None, usage: RequestUsage | None = None) -> None:
        """One call of `model` ended with `outcome` after `seconds` (None: never made)."""
        key = (model, outcome)
        self.calls[key] = self.calls.get(key, 0) + 1
        if seconds is not None:
            histogram = self.durations.get(model)
            if histogram is None:
                histogram = self.durations[model] = DurationHistogram(MODEL_CALL_BUCKETS)
            histogram.observe(seconds)
        if usage is not None:
            for direction, count in (("input", usage.prompt_tokens), ("output", usage.completion_tokens)):
                key = (model, direction)
                self.tokens[key] = self.tokens.get(key, 0) + count


#: The model calls of this process.
MODEL_CALLS = ModelCallStats()


def model_name(client: ChatCompletionClient) -> str:
    """The name of the model `client` asks (its configuration's `model`), else the client's class name."""
    name = getattr(client, "model", None)
    if not isinstance(name, str):
        try:
            with warnings.catch_warnings():  # a client's own remarks on how it describes itself
                warnings.simplefilter("ignore")
                name = client.dump_component().config.get("model")
        except Exception:  # a client that cannot describe itself is named by its class
            name = None
    return name if isinstance(name, str) and name else type(client).__name__
