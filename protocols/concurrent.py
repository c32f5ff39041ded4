"""The concurrent-agents contract: scatter one task to many workers, gather their results by topic.

A `GatherRequest` asks a gatherer to scatter a task, either with one publish to a group (the
runtime fans it out to every member) or with a direct message to each worker. Workers answer to
`reply_to`: the gatherer's inbox topic, where results are matched to their task by `task_id`, not
by waiting on a call. When every expected worker has answered (or the gatherer's deadline passes),
the requester gets the results, in worker order, and the names of any that never answered.

| message | from -> to | meaning |
|---|---|---|
| GatherRequest | app -> gatherer | scatter `content` to `workers`, gather |
| ScatterTask | gatherer -> group/workers | work on this; answer to `reply_to` |
| WorkerResult | worker -> gatherer | my result for `task_id` |
| GatheredResults | gatherer -> requester | everyone's results (and who is missing) |
"""

from __future__ import annotations

import uuid

from pydantic import Field, model_validator

from ._identifiers import AID, GroupId
from ._text import snip
from .contract import AUNContract

__all__ = ["GatherRequest", "GatheredResults", "ScatterTask", "WorkerResult"]


class GatherRequest(AUNContract, wire_name="aun.concurrent.GatherRequest"):
    """Scatter `content` to `workers` (through `group` if given) and gather their results."""

    content: str = Field(min_length=1)
    workers: list[AID] = Field(min_length=1)
    group: GroupId | None = None
    task_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12], min_length=1, max_length=128)

    @model_validator(mode="after")
    def _distinct(self) -> GatherRequest:
        if len(set(self.workers)) != len(self.workers):
            raise ValueError("workers must be distinct")
        return self

    def summary(self) -> str:
        via = f"group {self.group}" if self.group else "direct messages"
        return f"gather {self.task_id} from {len(self.workers)} workers via {via}: {snip(self.content, 50)}"


class ScatterTask(AUNContract, wire_name="aun.concurrent.ScatterTask"):
    """One piece of scattered work."""

    task_id: str
    content: str
    reply_to: AID

    def summary(self) -> str:
        return f"task {self.task_id}: {snip(self.content, 50)}"


class WorkerResult(AUNContract, wire_name="aun.concurrent.WorkerResult"):
    """A worker's result for one task."""

    task_id: str
    worker: AID
    content: str

    def summary(self) -> str:
        return f"{self.worker} on {self.task_id}: {snip(self.content, 50)}"


class GatheredResults(AUNContract, wire_name="aun.concurrent.GatheredResults"):
    """All results of a task, in worker order, and the workers that did not answer in time."""

    task_id: str
    results: list[WorkerResult]
    missing: list[AID] = Field(default_factory=list)

    def summary(self) -> str:
        missing = f", missing {', '.join(self.missing)}" if self.missing else ""
        return f"gathered {len(self.results)} results for {self.task_id}{missing}"
