"""Sequential workflow: stage agents that each refine the job and pass it along its route.

Each `StageAgent` asks the model to do its one step (`instructions`) on the content it got,
then sends the result to the next stage in the job's route, or, when it is the last, the
`WorkflowResult` to whoever started the job.
"""

from __future__ import annotations

from autogen_core.models import SystemMessage, UserMessage

from aun_runtime import MessageContext, event
from protocols.sequential import StageInput, StageOutput, WorkflowResult

from ._answering import ModelAnsweringAgent
from ._model_calls import ModelLike, result_text, use_model

__all__ = ["StageAgent"]


class StageAgent(ModelAnsweringAgent):
    """One step of a pipeline.

    Args:
        model: the model client, or a config to build one from.
        instructions: what this stage does to the content (its system prompt).
    """

    def __init__(self, model: ModelLike, *, instructions: str) -> None:
        super().__init__(instructions.strip().splitlines()[0])
        self.model = use_model(model)
        self.instructions = instructions

    @event
    async def on_stage(self, message: StageInput, ctx: MessageContext) -> None:
        inbound = self.inbound
        assert inbound is not None
        requester = message.requester or inbound.from_aid
        result = await self.model.create(
            [SystemMessage(content=self.instructions), UserMessage(content=message.content, source="user")]
        )
        output = result_text(result).strip()
        trail = [*message.trail, StageOutput(stage=self.aid, content=output)]
        if message.route:
            following = StageInput(
                content=output,
                job_id=message.job_id,
                route=message.route[1:],
                requester=requester,
                trail=trail,
            )
            await self.send(message.route[0], following)
        else:
            await self.send(requester, WorkflowResult(job_id=message.job_id, content=output, trail=trail))
