"""The mixture-of-agents contract: layers of workers refine each other's answers; an aggregator
writes the final one.

The orchestrator sends a `LayerTask` to every worker of layer 1, gathers their
`LayerResult` messages on its inbox topic (by `task_id` and `layer`), then sends layer 2
the same task *with layer 1's answers*, and so on. After the last layer it aggregates the answers
into one `MixtureResult` for the requester.
"""

from __future__ import annotations

import uuid

from pydantic import Field

from ._identifiers import AID
from ._text import snip
from .contract import AUNContract

__all__ = ["LayerResult", "LayerTask", "MixtureResult", "MixtureTask"]


class MixtureTask(AUNContract, wire_name="aun.mixture.MixtureTask"):
    """A task for the orchestrator."""

    task: str = Field(min_length=1)
    task_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12], min_length=1, max_length=128)

    def summary(self) -> str:
        return f"mixture task {self.task_id}: {snip(self.task, 50)}"


class LayerTask(AUNContract, wire_name="aun.mixture.LayerTask"):
    """The task for one worker of one layer, with the previous layer's answers (empty for layer 1)."""

    task_id: str
    task: str
    layer: int = Field(ge=1)
    previous: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        seen = f", building on {len(self.previous)} answers" if self.previous else ""
        return f"layer {self.layer} of {self.task_id}{seen}"


class LayerResult(AUNContract, wire_name="aun.mixture.LayerResult"):
    """One worker's answer in one layer."""

    task_id: str
    layer: int = Field(ge=1)
    worker: AID
    content: str

    def summary(self) -> str:
        return f"layer {self.layer} answer from {self.worker}: {snip(self.content, 50)}"


class MixtureResult(AUNContract, wire_name="aun.mixture.MixtureResult"):
    """The aggregated answer."""

    task_id: str
    answer: str
    layers: int

    def summary(self) -> str:
        return f"answer to {self.task_id} after {self.layers} layers: {snip(self.answer, 50)}"
