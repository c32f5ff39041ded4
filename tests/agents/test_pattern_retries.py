"""The pattern agents and the agentchat adapter ride out a model's passing failure as `AutonomousAgent` does.

Each agent's model is a real OpenAI client on an OpenAI-compatible server on loopback that fails
(HTTP 500) the first request of each kind, with a client that does not retry a request itself
(`max_retries=0`), so the failure reaches the turn. Before, such a turn was a retryable dead letter
at once: the stage never passed its job on, the mixture never aggregated, the assistant never answered.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from autogen_agentchat.agents import AssistantAgent

import agents
from agents.agentchat import AgentChatAgent, from_agentchat
from agents.debate import DebateModerator, Solver
from agents.mixture import AGGREGATOR_PROMPT, MixtureOrchestrator, MixtureWorker
from agents.sequential import StageAgent
from aun_runtime import DEFAULT_TURN_RETRY, AUNAgent, AUNRuntime, RecordKind, TurnRetry
from aun_runtime.models import ModelConfig, resolve_model
from protocols.debate import DebateQuestion, SolverFinal
from protocols.mixture import MixtureResult, MixtureTask
from protocols.sequential import StageInput, WorkflowResult
from tests.models.openai_stand_in import OpenAIStandIn, Reply, openai_stand_in

INFO = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
        "structured_output": False, "multiple_system_messages": True}
#: Quick second tries (the agents' default waits 5 s first).
QUICK = TurnRetry(tries=3, backoff=0.05)


class FailsFirst:
    """Answers HTTP 500 to the first request of each kind (`kind_of(body)`), then `answer(body)`."""

    def __init__(self, kind_of: Callable[[dict[str, Any]], str], answer: Callable[[dict[str, Any]], str]) -> None:
        self.kind_of, self.answer = kind_of, answer
        self.failed: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply | str:
        kind = self.kind_of(body)
        with self.lock:
            first = kind not in self.failed
            self.failed.add(kind)
        return Reply(status=500) if first else self.answer(body)


def config(stand_in: OpenAIStandIn) -> ModelConfig:
    return ModelConfig(source="openai", model="stand-in", base_url=stand_in.base_url, model_info=INFO,
                       max_retries=0, backoff=0.01)


def system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


AgentT = TypeVar("AgentT", bound=AUNAgent)


def quick(agent: AgentT) -> AgentT:
    agent.turn_retry = QUICK
    return agent


async def run(runtime: AUNRuntime, to: str, payload: Any) -> list[Any]:
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    await inbox.send(to, payload)
    await asyncio.wait_for(runtime.settle(), timeout=60)
    return [r.message for r in runtime.archive.history("app.local", kinds=[RecordKind.RECEIVED]) if r.message]


def only(messages: list[Any], kind: str) -> dict[str, Any]:
    [data] = [m.payload.data for m in messages if m.payload.kind == kind]
    return dict(data)


async def test_a_pipeline_stage_tries_its_turn_again_and_passes_the_job_on_once() -> None:
    script = FailsFirst(system, lambda body: f"{system(body)} done")
    with openai_stand_in(script) as stand_in:
        model = config(stand_in)
        async with AUNRuntime() as runtime:
            for stage in ("draft", "edit"):
                await runtime.register_agent(f"{stage}.local", lambda s=stage: quick(StageAgent(model, instructions=s)))
            received = await run(runtime, "draft.local", StageInput(content="a text", route=["edit.local"]))
            result = only(received, WorkflowResult.wire_name)
            assert result["content"] == "edit done"
            assert runtime.stats.turn_retries == 2 and runtime.stats.dead_letters == 0
            # The second stage got the job once: the first try of the first stage sent nothing.
            assert len(runtime.archive.history("edit.local", kinds=[RecordKind.RECEIVED])) == 1


async def test_a_mixture_aggregates_on_a_second_try_with_every_answer_it_gathered() -> None:
    script = FailsFirst(lambda body: "aggregate" if system(body) == AGGREGATOR_PROMPT else "work",
                        lambda body: "final" if system(body) == AGGREGATOR_PROMPT else "an answer")
    with openai_stand_in(script) as stand_in:
        model = config(stand_in)
        async with AUNRuntime() as runtime:
            for aid in ("w1.local", "w2.local"):
                await runtime.register_agent(aid, lambda: quick(MixtureWorker(model)))
            layers = [["w1.local", "w2.local"]]
            await runtime.register_agent("orchestrator.local", lambda: quick(MixtureOrchestrator(model, layers=layers)))
            received = await run(runtime, "orchestrator.local", MixtureTask(task="split 432", task_id="t1"))
            assert only(received, MixtureResult.wire_name)["answer"] == "final"
            assert runtime.stats.dead_letters == 0
            # The aggregator's second try was asked with both answers, as the first was.
            [_, second] = [r for r in stand_in.requests if system(r) == AGGREGATOR_PROMPT]
            assert second["messages"][1]["content"].count("an answer") == 2


async def test_debate_solvers_try_again_and_the_debate_ends_once() -> None:
    script = FailsFirst(lambda body: str(body["messages"][1]["content"])[:40],
                        lambda body: "Twelve and twenty-four.\nANSWER: 36")
    with openai_stand_in(script) as stand_in:
        model = config(stand_in)
        async with AUNRuntime() as runtime:
            ring = {"s1.local": ["s2.local"], "s2.local": ["s1.local"]}
            for aid, neighbours in ring.items():
                await runtime.register_agent(aid, lambda n=neighbours: quick(Solver(model, neighbours=n)))
            await runtime.register_agent("moderator.local", lambda: DebateModerator(solvers=list(ring), rounds=2))
            received = await run(runtime, "moderator.local", DebateQuestion(question="12 + 24?", question_id="q"))
            assert [m.payload.kind for m in received] == ["aun.debate.DebateResult"]
            finals = runtime.archive.history("moderator.local", kinds=[RecordKind.RECEIVED])
            assert sorted(r.message.from_aid for r in finals if r.message and r.message.payload.kind
                          == SolverFinal.wire_name) == ["s1.local", "s2.local"]
            assert runtime.stats.turn_retries >= 1 and runtime.stats.dead_letters == 0


async def test_an_agentchat_assistant_tries_again_with_the_question_in_its_memory_once() -> None:
    script = FailsFirst(lambda body: "chat", lambda body: "here I am")
    with openai_stand_in(script) as stand_in:
        client = resolve_model(config(stand_in))
        async with AUNRuntime() as runtime:
            make = from_agentchat(lambda: AssistantAgent("assistant", model_client=client))
            await runtime.register_agent("assistant.local", lambda: quick(make()))
            received = await run(runtime, "assistant.local", "hello?")
            assert [m.text for m in received] == ["here I am"]
            assert runtime.stats.turn_retries == 1 and runtime.stats.dead_letters == 0
            _failed, second = stand_in.requests
            asked = [m["content"] for m in second["messages"] if m["role"] == "user"]
            assert asked == ["hello?"], asked  # not twice: the failed try's memory was put back


def test_every_agent_that_takes_a_model_retries_its_turns_by_default() -> None:
    modules = [importlib.import_module(f"agents.{info.name}") for info in pkgutil.iter_modules(agents.__path__)]
    takes_a_model = {
        cls for module in modules for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, AUNAgent) and "model" in inspect.signature(cls).parameters
    }
    assert {StageAgent, MixtureOrchestrator, Solver} <= takes_a_model
    for cls in takes_a_model | {AgentChatAgent}:
        chosen = inspect.signature(cls).parameters.get("turn_retry")  # AutonomousAgent's is an argument
        assert (cls.turn_retry if chosen is None else chosen.default) == DEFAULT_TURN_RETRY, cls
