"""The sequential-workflow contract: a job passes through a chain of stages, each refining the last.

The route travels with the job (the stages still to come), so a stage agent works in any pipeline and
keeps no state. The last stage sends the result to whoever started the job.

| message | from -> to | meaning |
|---|---|---|
| StageInput | app or stage -> stage | work on `content`; then pass it along `route` |
| WorkflowResult | last stage -> requester | the final content and every stage's output |
"""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field

from ._identifiers import AID
from ._text import snip
from .contract import AUNContract

__all__ = ["StageInput", "StageOutput", "WorkflowResult"]


class StageOutput(BaseModel):
    """What one stage produced."""

    model_config = ConfigDict(frozen=True)

    stage: AID
    content: str


class StageInput(AUNContract, wire_name="aun.sequential.StageInput"):
    """Work for a stage. `requester` is filled in by the first stage from the sender when absent."""

    content: str = Field(min_length=1)
    job_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12], min_length=1, max_length=128)
    route: list[AID] = Field(default_factory=list)
    requester: AID | None = None
    trail: list[StageOutput] = Field(default_factory=list)

    def summary(self) -> str:
        after = f" (then {', '.join(self.route)})" if self.route else " (last stage)"
        return f"job {self.job_id}{after}: {snip(self.content, 60)}"


class WorkflowResult(AUNContract, wire_name="aun.sequential.WorkflowResult"):
    """The finished job."""

    job_id: str
    content: str
    trail: list[StageOutput]

    def summary(self) -> str:
        return f"job {self.job_id} done after {len(self.trail)} stages: {snip(self.content, 60)}"
