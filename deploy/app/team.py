"""The application the deploy files run: the reflection team of docs/several-machines.md, split in
two sides, one per worker. Replace it with your own (`AUN_APP=module:function`)."""

from agents.reflection import Coder, Executor, Reviewer
from agents.stand_ins.reflection import reflection_team  # or any model client: model_client_from_env()
from protocols.reflection import CodingTaskMsg


async def coder_side(runtime):
    model = reflection_team()
    await runtime.register_agent("coder.local", lambda: Coder(model, executor="executor.local"))
    inbox = await runtime.open_inbox("app.local")
    await inbox.send("coder.local", CodingTaskMsg(task="Print the first 10 Fibonacci numbers."))


async def review_side(runtime):
    model = reflection_team()
    await runtime.register_agent("executor.local", lambda: Executor(reviewer="reviewer.local"))
    await runtime.register_agent("reviewer.local", lambda: Reviewer(model, coder="coder.local"))
