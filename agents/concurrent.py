"""Concurrent agents: a gatherer scatters a task to workers that work at the same time, and gathers
their results by topic.

* `Gatherer` takes a `GatherRequest`, scatters a
  `ScatterTask` (one publish to a group, or one message per worker) and
  collects the `WorkerResult` messages arriving on its inbox topic. With
  a `deadline`, it reports what it has when time is up, naming the workers that did not answer.
* `ConcurrentWorker` answers each task with the model, in its own mailbox: workers run side by
  side, each one message at a time.
"""

from __future__ import annotations

from autogen_core.models import SystemMessage, UserMessage

from aun_runtime import MessageContext, event
from protocols.concurrent import GatheredResults, GatherRequest, ScatterTask, WorkerResult

from ._answering import AnsweringAgent, ModelAnsweringAgent
from ._gather import GatherTable
from ._model_calls import ModelLike, result_text, use_model

__all__ = ["ConcurrentWorker", "Gatherer"]


class Gatherer(AnsweringAgent):
    """Scatters tasks and gathers results.

    Args:
        deadline: seconds to wait for all results before reporting what arrived (None: wait for all).
    """

    def __init__(self, *, deadline: float | None = None) -> None:
        super().__init__("scatters a task to workers and gathers their results")
        self.deadline = deadline
        self.table: GatherTable[WorkerResult] = GatherTable()

    @event
    async def on_request(self, message: GatherRequest, ctx: MessageContext) -> None:
        inbound = self.inbound
        assert inbound is not None
        dropped = self.table.open(message.task_id, inbound.from_aid, message.workers)
        if dropped is not None:
            self.think(f"too many open gathers: dropped the oldest, still missing {dropped.missing}")
        task = ScatterTask(task_id=message.task_id, content=message.content, reply_to=self.aid)
        if message.group is not None:
            await self.group_send(message.group, task)  # one publish; the runtime fans it out
        else:
            for worker in message.workers:
                await self.send(worker, task)
        if self.deadline is not None:
            task_id = message.task_id
            self.schedule(lambda: self._expire(task_id), delay=self.deadline)

    @event
    async def on_result(self, message: WorkerResult, ctx: MessageContext) -> None:
        gather = self.table.add(message.task_id, message.worker, message)
        if gather is None:
            if message.task_id not in self.table:
                self.think(f"late or unexpected result from {message.worker} for {message.task_id}")
            return
        await self.send(gather.requester, GatheredResults(task_id=message.task_id, results=gather.in_order()))

    async def _expire(self, task_id: str) -> None:
        gather = self.table.close(task_id)
        if gather is None:
            return  # already complete
        self.think(f"deadline for {task_id}: {gather.missing} did not answer")
        report = GatheredResults(task_id=task_id, results=gather.in_order(), missing=gather.missing)
        await self.send(gather.requester, report)


class ConcurrentWorker(ModelAnsweringAgent):
    """Answers scattered tasks with the model.

    Args:
        model: the model client, or a config to build one from.
        instructions: the worker's role (its system prompt).
    """

    def __init__(self, model: ModelLike, *, instructions: str) -> None:
        super().__init__(instructions.strip().splitlines()[0])
        self.model = use_model(model)
        self.instructions = instructions

    @event
    async def on_task(self, message: ScatterTask, ctx: MessageContext) -> None:
        result = await self.model.create(
            [SystemMessage(content=self.instructions), UserMessage(content=message.content, source="user")]
        )
        answer = WorkerResult(task_id=message.task_id, worker=self.aid, content=result_text(result).strip())
        await self.send(message.reply_to, answer)
