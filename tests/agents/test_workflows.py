"""Sequential workflow, concurrent agents, mixture of agents, debate and handoffs: behaviour and
determinism."""

from __future__ import annotations

from typing import Any

import pytest

from agents import stand_ins
from agents.debate import DebateModerator, Solver
from aun_runtime import AUNMessage, AUNRuntime, JsonPayload, RecordKind
from aun_runtime.testing import Silent
from protocols.concurrent import GatheredResults, GatherRequest
from protocols.debate import DebateQuestion, DebateResult, majority
from protocols.handoffs import AgentReply
from protocols.mixture import MixtureResult
from protocols.sequential import WorkflowResult

from . import scenarios


def contract(message: AUNMessage, cls: type[Any]) -> Any:
    assert isinstance(message.payload, JsonPayload) and message.payload.kind == cls.wire_name
    return cls.model_validate(message.payload.data)


async def test_sequential_workflow_passes_the_job_along_its_route() -> None:
    async with AUNRuntime() as runtime:
        inbox = await scenarios.sequential(runtime)
        [message] = inbox.received
        result = contract(message, WorkflowResult)
    assert message.from_aid == "proofreader.local"
    assert [step.stage for step in result.trail] == ["extractor.local", "writer.local", "proofreader.local"]
    assert result.content.startswith("**Stay refreshed, anywhere.**")
    assert "keeps drinks cold for 24 hours" in result.trail[1].content  # each stage built on the last


@pytest.mark.parametrize("via_group", [True, False])
async def test_concurrent_agents_scatter_and_gather_by_topic(via_group: bool) -> None:
    async with AUNRuntime() as runtime:
        inbox = await scenarios.concurrent(runtime, via_group=via_group)
        [message] = inbox.received
        gathered = contract(message, GatheredResults)
        sent_by_gatherer = runtime.archive.history("gatherer.local", kinds=[RecordKind.SENT])
    assert [r.worker for r in gathered.results] == ["summariser.local", "counter.local", "keywords.local"]
    assert gathered.missing == []
    assert gathered.results[1].content == "15 words, 3 sentences"
    scatters = [
        r for r in sent_by_gatherer if r.message and r.message.payload.kind == "aun.concurrent.ScatterTask"
    ]  # type: ignore[union-attr]
    assert len(scatters) == (1 if via_group else 3)  # one publish fans out to the whole group


async def test_a_gatherer_with_a_deadline_reports_who_did_not_answer() -> None:
    async with AUNRuntime() as runtime:
        await runtime.register_agent("gatherer.local", lambda: scenarios.Gatherer(deadline=0.05))
        await runtime.register_agent("mute.local", Silent)
        await runtime.register_agent(
            "counter.local",
            lambda: scenarios.ConcurrentWorker(
                stand_ins.concurrent_workers(), instructions="You count words."
            ),
        )
        inbox = await runtime.open_inbox()
        await runtime.start()
        await inbox.send(
            "gatherer.local", GatherRequest(content="a b c", workers=["counter.local", "mute.local"])
        )
        message = await inbox.next(timeout=10)
        assert message is not None
        gathered = contract(message, GatheredResults)
    assert [r.worker for r in gathered.results] == ["counter.local"]
    assert gathered.missing == ["mute.local"]


async def test_mixture_of_agents_refines_layer_by_layer_then_aggregates() -> None:
    async with AUNRuntime() as runtime:
        inbox = await scenarios.mixture(runtime)
        [message] = inbox.received
        result = contract(message, MixtureResult)
        layer2 = [
            r.message for r in runtime.archive.history("w4.local", kinds=[RecordKind.RECEIVED]) if r.message
        ]
    assert result.layers == 2
    assert result.answer == "Split 432 in the ratio 3:4:2: Alice gets 144, Bob gets 192, Charlie gets 96."
    # Layer 2 saw all three layer-1 answers, including the hasty one, in worker order.
    previous = layer2[0].payload.data["previous"]  # type: ignore[union-attr]
    assert len(previous) == 3 and "even split" in previous[1]


async def test_debate_converges_and_takes_the_majority() -> None:
    async with AUNRuntime() as runtime:
        inbox = await scenarios.debate(runtime, rounds=2)
        [message] = inbox.received
        result = contract(message, DebateResult)
        first_rounds = [
            r.message.payload.data  # type: ignore[union-attr]
            for r in runtime.archive.history("s2.local", kinds=[RecordKind.RECEIVED])
            if r.message and r.message.payload.kind == "aun.debate.DebateAnswer"  # type: ignore[union-attr]
        ]
    assert result.answer == "36" and set(result.votes.values()) == {"36"}
    assert {a["solver"]: a["answer"] for a in first_rounds if a["round"] == 1}[
        "s3.local"
    ] == "24"  # slipped, then came round


async def test_a_debate_longer_than_the_hop_budget_is_stopped_by_the_loop_guard() -> None:
    model = stand_ins.debate()
    async with AUNRuntime(max_hops=5) as runtime:
        for aid, neighbours in scenarios.RING.items():
            await runtime.register_agent(aid, lambda n=neighbours: Solver(model, neighbours=n))
        await runtime.register_agent(
            "moderator.local", lambda: DebateModerator(solvers=list(scenarios.RING), rounds=10)
        )
        inbox = await runtime.open_inbox()
        await runtime.start()
        await inbox.send("moderator.local", DebateQuestion(question=scenarios.MUFFINS))
        await runtime.settle()
        assert runtime.stats.loop_stops > 0
        assert len(model.requests) < 4 * 10  # stopped long before ten rounds of four solvers
        assert inbox.received == []  # no result: the stop is recorded instead
        assert runtime.archive.count(kind=RecordKind.LOOP_STOP) == runtime.stats.loop_stops


def test_majority_breaks_ties_the_same_way_every_time() -> None:
    assert majority({"a": "7", "b": "5", "c": "7"}) == "7"
    assert majority({"a": "7", "b": "5"}) == "5"


async def test_handoffs_delegate_by_message_and_a_person_answers_from_a_queue() -> None:
    async with AUNRuntime() as runtime:
        await scenarios.handoffs(runtime)
        replies = [
            contract(r.message, AgentReply)
            for r in runtime.archive.history("customer.local", kinds=[RecordKind.RECEIVED])
            if r.message
        ]
        handoffs = [
            r.message
            for r in runtime.archive.records(kinds=[RecordKind.SENT])
            if r.message and r.message.payload.kind == "aun.handoffs.Handoff"  # type: ignore[union-attr]
        ]
    assert [(r.agent, r.text[:30]) for r in replies] == [
        ("repairs.local", "I found it: order 1234, a cera"),
        ("human.local", "Hi, Sam here. I will call the "),
        ("human.local", "You are welcome. Bye!"),
    ]
    assert [(m.from_aid, m.to) for m in handoffs] == [
        ("triage.local", "repairs.local"),
        ("repairs.local", "human.local"),
    ]


async def test_an_empty_desk_tells_the_customer_instead_of_hanging() -> None:
    async with AUNRuntime() as runtime:
        await scenarios.handoffs(runtime, desk_answers=[])
        replies = [
            contract(r.message, AgentReply).text
            for r in runtime.archive.history("customer.local", kinds=[RecordKind.RECEIVED])
            if r.message
        ]
    assert replies[-1] == "Nobody is at the desk right now; we will write back to you."


@pytest.mark.parametrize("scenario", ["sequential", "concurrent", "mixture", "debate", "handoffs"])
async def test_every_pattern_gives_the_same_trace_twice(scenario: str) -> None:
    traces = []
    for _ in range(2):
        async with AUNRuntime() as runtime:
            await getattr(scenarios, scenario)(runtime)
            traces.append(runtime.transcript())
    assert traces[0] == traces[1]
    assert "DEAD LETTER" not in traces[0] and "LOOP GUARD" not in traces[0]
