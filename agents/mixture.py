"""Mixture of agents: layers of workers refine each other's answers; the orchestrator aggregates.

`MixtureOrchestrator` scatters a `LayerTask` to the workers of
layer 1, gathers their answers from its inbox topic, sends layer 2 the task with those answers, and
so on; after the last layer it asks the model to synthesise one answer and sends the
`MixtureResult` to the requester. `MixtureWorker` answers a layer task,
taking the previous layer's answers into account.
"""

from __future__ import annotations

from autogen_core.models import SystemMessage, UserMessage

from aun_runtime import MessageContext, event
from protocols.mixture import LayerResult, LayerTask, MixtureResult, MixtureTask

from ._answering import ModelAnsweringAgent
from ._gather import MAX_OPEN_GATHERS, GatherTable
from ._model_calls import ModelLike, result_text, use_model

__all__ = ["AGGREGATOR_PROMPT", "SYNTHESIS_PROMPT", "MixtureOrchestrator", "MixtureWorker"]

SYNTHESIS_PROMPT = """\
You have been given answers to the task from several assistants. Judge them critically: some may be
wrong or biased. Write one refined, accurate answer of your own; do not merely repeat theirs."""

AGGREGATOR_PROMPT = """\
You combine the answers several assistants gave to a task into the single best final answer.
Keep what they agree on and what is correct, drop what is wrong, and answer the task directly."""


def _with_previous(task: str, previous: list[str]) -> str:
    if not previous:
        return task
    listed = "\n".join(f"{n}. {answer}" for n, answer in enumerate(previous, start=1))
    return f"{task}\n\nAnswers from the previous layer:\n{listed}"


class MixtureWorker(ModelAnsweringAgent):
    """Answers one layer of a mixture task.

    Args:
        model: the model client, or a config to build one from.
        instructions: the worker's role (its system prompt).
    """

    def __init__(self, model: ModelLike, *, instructions: str = "You are a helpful assistant.") -> None:
        super().__init__("answers one layer of a mixture-of-agents task")
        self.model = use_model(model)
        self.instructions = instructions

    @event
    async def on_layer(self, message: LayerTask, ctx: MessageContext) -> None:
        system = self.instructions + ("\n\n" + SYNTHESIS_PROMPT if message.previous else "")
        result = await self.model.create(
            [
                SystemMessage(content=system),
                UserMessage(content=_with_previous(message.task, message.previous), source="user"),
            ]
        )
        inbound = self.inbound
        assert inbound is not None
        answer = LayerResult(
            task_id=message.task_id, layer=message.layer, worker=self.aid, content=result_text(result).strip()
        )
        await self.send(inbound.from_aid, answer)


class MixtureOrchestrator(ModelAnsweringAgent):
    """Drives the layers and aggregates.

    Args:
        model: the aggregator's model client, or a config to build one from.
        layers: the workers' AIDs, layer by layer.
    """

    def __init__(self, model: ModelLike, *, layers: list[list[str]]) -> None:
        super().__init__("runs layers of workers and aggregates their answers")
        if not layers or not all(layers):
            raise ValueError("a mixture needs at least one layer, and every layer at least one worker")
        self.model = use_model(model)
        self.layers = layers
        self.table: GatherTable[LayerResult] = GatherTable()
        self.tasks: dict[str, MixtureTask] = {}

    @event
    async def on_task(self, message: MixtureTask, ctx: MessageContext) -> None:
        inbound = self.inbound
        assert inbound is not None
        if len(self.tasks) >= MAX_OPEN_GATHERS:  # bounded like the gathers themselves
            self.tasks.pop(next(iter(self.tasks)))
        self.tasks[message.task_id] = message
        await self._run_layer(message, 1, [], inbound.from_aid)

    @event
    async def on_layer_result(self, message: LayerResult, ctx: MessageContext) -> None:
        gather = self.table.add((message.task_id, message.layer), message.worker, message)
        if gather is None:
            return
        answers = [result.content for result in gather.in_order()]
        task = self.tasks[message.task_id]
        if message.layer < len(self.layers):
            await self._run_layer(task, message.layer + 1, answers, gather.requester)
            return
        try:
            result = await self.model.create(
                [
                    SystemMessage(content=AGGREGATOR_PROMPT),
                    UserMessage(content=_with_previous(task.task, answers), source="user"),
                ]
            )
        except BaseException:
            # The gather was complete and forgotten: open it again, so that a second try of this
            # turn (or a redrive of its message) finds the other answers where the first one did.
            self.table.reopen((message.task_id, message.layer), gather)
            raise
        del self.tasks[message.task_id]
        final = MixtureResult(
            task_id=task.task_id, answer=result_text(result).strip(), layers=len(self.layers)
        )
        await self.send(gather.requester, final)

    async def _run_layer(self, task: MixtureTask, layer: int, previous: list[str], requester: str) -> None:
        workers = self.layers[layer - 1]
        self.table.open((task.task_id, layer), requester, workers)
        for worker in workers:
            await self.send(
                worker, LayerTask(task_id=task.task_id, task=task.task, layer=layer, previous=previous)
            )
