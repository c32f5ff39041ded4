"""The pattern scenarios the tests run (the notebooks show the same, step by step)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from autogen_core.tools import FunctionTool

from agents import stand_ins
from agents.concurrent import ConcurrentWorker, Gatherer
from agents.debate import DebateModerator, Solver
from agents.handoffs import Customer, HumanDesk, ServiceAgent
from agents.mixture import MixtureOrchestrator, MixtureWorker
from agents.sequential import StageAgent
from aun_runtime import AUNRuntime, Inbox
from protocols.concurrent import GatherRequest
from protocols.debate import DebateQuestion
from protocols.mixture import MixtureTask
from protocols.sequential import StageInput

Scenario = Callable[[AUNRuntime], Awaitable[Inbox | None]]

PRODUCT = "Our new product: an eco-friendly stainless steel water bottle, keeps drinks cold for 24 hours and leak-proof lid."


async def sequential(runtime: AUNRuntime) -> Inbox:
    model = stand_ins.sequential_workflow()
    stages = {
        "extractor.local": "You extract the key concepts of a product description as a short list.",
        "writer.local": "You write a short marketing paragraph from a list of concepts.",
        "proofreader.local": "You proofread marketing copy and give it a headline.",
    }
    for aid, instructions in stages.items():
        await runtime.register_agent(aid, lambda i=instructions: StageAgent(model, instructions=i))
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    await inbox.send("extractor.local", StageInput(content=PRODUCT, job_id="bottle", route=list(stages)[1:]))
    await runtime.settle()
    return inbox


TEXT = "The runtime delivers every message. Agents decide whether to answer. Silence is a legal answer."


async def concurrent(runtime: AUNRuntime, *, via_group: bool = True, deadline: float | None = None) -> Inbox:
    model = stand_ins.concurrent_workers()
    workers = {
        "summariser.local": "You summarise a text in one sentence.",
        "counter.local": "You count the words and sentences of a text.",
        "keywords.local": "You list the main keywords of a text.",
    }
    for aid, instructions in workers.items():
        await runtime.register_agent(aid, lambda i=instructions: ConcurrentWorker(model, instructions=i))
    await runtime.register_agent("gatherer.local", lambda: Gatherer(deadline=deadline))
    await runtime.create_group("analysts", [*workers, "gatherer.local"])
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    request = GatherRequest(
        content=TEXT, workers=list(workers), group="analysts" if via_group else None, task_id="text-1"
    )
    await inbox.send("gatherer.local", request)
    await runtime.settle()
    return inbox


COOKIES = "I have 432 cookies, and divide them 3:4:2 between Alice, Bob, and Charlie. How many cookies does each person get?"


async def mixture(runtime: AUNRuntime) -> Inbox:
    model = stand_ins.mixture_of_agents()
    layers = [["w1.local", "w2.local", "w3.local"], ["w4.local", "w5.local"]]
    styles = {"w2.local": "You are hasty and answer from the first impression."}
    for aid in [w for layer in layers for w in layer]:
        instructions = "You are a helpful assistant. " + styles.get(aid, "You check your arithmetic.")
        await runtime.register_agent(aid, lambda i=instructions: MixtureWorker(model, instructions=i))
    await runtime.register_agent("orchestrator.local", lambda: MixtureOrchestrator(model, layers=layers))
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    await inbox.send("orchestrator.local", MixtureTask(task=COOKIES, task_id="cookies"))
    await runtime.settle()
    return inbox


MUFFINS = "A bakery sells 12 muffins in the morning and twice as many in the afternoon. How many muffins does it sell in total?"
RING = {
    "s1.local": ["s2.local", "s4.local"],
    "s2.local": ["s1.local", "s3.local"],
    "s3.local": ["s2.local", "s4.local"],
    "s4.local": ["s3.local", "s1.local"],
}


async def debate(runtime: AUNRuntime, *, rounds: int = 2) -> Inbox:
    model = stand_ins.debate()
    for aid, neighbours in RING.items():
        style = "You are hasty." if aid == "s3.local" else "You are careful."
        await runtime.register_agent(aid, lambda n=neighbours, s=style: Solver(model, neighbours=n, style=s))
    await runtime.register_agent(
        "moderator.local", lambda: DebateModerator(solvers=list(RING), rounds=rounds)
    )
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    await inbox.send("moderator.local", DebateQuestion(question=MUFFINS, question_id="muffins"))
    await runtime.settle()
    return inbox


ORDERS = {"1234": "order 1234, a ceramic mug, delivered on Monday"}


def look_up_order(order_id: str) -> str:
    """Look an order up by its number."""
    return ORDERS.get(order_id, f"no order {order_id}")


async def handoffs(runtime: AUNRuntime, *, desk_answers: list[str] | None = None) -> None:
    model = stand_ins.handoffs()
    lookup = FunctionTool(look_up_order, description="Look an order up by its number.")
    await runtime.register_agent(
        "triage.local",
        lambda: ServiceAgent(
            model,
            instructions="You are the triage agent of a shop. Route the customer to sales or repairs.",
            handoffs={"transfer_to_sales": "sales.local", "transfer_to_repairs": "repairs.local"},
        ),
    )
    await runtime.register_agent(
        "sales.local", lambda: ServiceAgent(model, instructions="You are the sales agent of a shop.")
    )
    await runtime.register_agent(
        "repairs.local",
        lambda: ServiceAgent(
            model,
            instructions="You are the repairs agent of a shop. Look orders up; refund damaged items.",
            handoffs={"transfer_to_human": "human.local"},
            tools=[lookup],
        ),
    )
    answers: asyncio.Queue[str] = asyncio.Queue()
    default_answers = ["Hi, Sam here. I will call the courier today.", "You are welcome. Bye!"]
    for answer in desk_answers if desk_answers is not None else default_answers:
        answers.put_nowait(answer)
    await runtime.register_agent("human.local", lambda: HumanDesk(answers, wait=0.5))
    lines: asyncio.Queue[str] = asyncio.Queue()
    for line in (
        "Hi, my order #1234 arrived broken.",
        "Thanks. Can I talk to a person about the courier?",
        "Great, bye!",
    ):
        lines.put_nowait(line)
    await runtime.register_agent(
        "customer.local", lambda: Customer(lines, first_agent="triage.local"), eager=True
    )
    await runtime.start()
    await runtime.settle()
