"""The reflection team: real execution, review rounds, crashes, the round limit, determinism."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agents.reflection import CODER_PROMPT, REVIEWER_PROMPT, Reviewer, register_reflection_team
from aun_runtime import AUNRuntime, InvalidAIDError, JsonPayload, RecordKind
from aun_runtime.models import ModelConfig, ModelRequest, ScriptedChatCompletionClient
from protocols.reflection import (
    CodeGenMsg,
    CodingResultMsg,
    CodingTaskMsg,
    ExecutionResultMsg,
    ReviewMsg,
    TaskRef,
)

TASK = "Print the sum of the integers from 0 to 9."
NOTEBOOK_CASSETTE = Path(__file__).resolve().parents[2] / "notebooks" / "cassettes" / "01_reflection.json"


def team_model(attempts: list[str], expected_stdout: str = "45") -> ScriptedChatCompletionClient:
    """Coder: the n-th attempt for round n. Reviewer: approves exactly when the real run printed the
    expected output, and otherwise says what it saw."""

    def respond(request: ModelRequest) -> str:
        if request.system == CODER_PROMPT:
            rejected = re.search(r"Your program \(round (\d+)\) was rejected", request.last_text)
            round_ = int(rejected.group(1)) + 1 if rejected else 1
            return f"```python\n{attempts[min(round_, len(attempts)) - 1]}\n```\nDone."
        assert request.system == REVIEWER_PROMPT
        stdout = re.search(r"Stdout:\n```\n(.*?)\n```", request.last_text, re.DOTALL)
        printed = stdout.group(1) if stdout else ""
        if printed.strip() == expected_stdout:
            return json.dumps({"approved": True, "reasons": []})
        error = re.search(r"(\w+Error: .*)", request.last_text)
        reason = (
            f"it crashed with {error.group(1)}"
            if error
            else f"it printed {printed!r}, not {expected_stdout!r}"
        )
        return json.dumps({"approved": False, "reasons": [reason]})

    return ScriptedChatCompletionClient(respond)


async def run_task(
    model: ScriptedChatCompletionClient, task: CodingTaskMsg, **team: int
) -> tuple[AUNRuntime, CodingResultMsg]:
    runtime = AUNRuntime()
    await register_reflection_team(runtime, model, **team)
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    await inbox.send("coder.local", task)
    await runtime.settle()
    [result] = [m for m in inbox.received if isinstance(m.payload, JsonPayload)]
    decoded = CodingResultMsg.model_validate(result.payload.data)  # type: ignore[union-attr]
    return runtime, decoded


def contracts_received(runtime: AUNRuntime, aid: str) -> list[str]:
    return [
        r.message.payload.kind  # type: ignore[union-attr]
        for r in runtime.archive.history(aid, kinds=[RecordKind.RECEIVED])
        if r.message is not None
    ]


async def test_a_task_that_passes_on_the_second_round() -> None:
    model = team_model(["print(sum(range(9)))", "print(sum(range(10)))"])
    runtime, result = await run_task(model, CodingTaskMsg(task=TASK, task_id="sum"))
    assert result.status == "approved" and result.approved
    assert result.rounds == 2 and result.stdout == "45\n"  # printed by really running the code
    assert result.code.strip() == "print(sum(range(10)))"
    # The flow, as each agent saw it: reject, fix, run again, approve.
    assert contracts_received(runtime, "coder.local") == [
        "aun.reflection.CodingTask",
        "aun.reflection.Review",
    ]
    assert contracts_received(runtime, "executor.local") == ["aun.reflection.CodeGen"] * 2
    assert contracts_received(runtime, "reviewer.local") == ["aun.reflection.ExecutionResult"] * 2
    [review] = [
        r.message
        for r in runtime.archive.history("coder.local", kinds=[RecordKind.RECEIVED])
        if r.message is not None and r.message.payload.kind == "aun.reflection.Review"  # type: ignore[union-attr]
    ]
    reasons = ReviewMsg.model_validate(review.payload.data).reasons  # type: ignore[union-attr]
    assert reasons == ["it printed '36', not '45'"]
    # The Coder's second request showed it its first attempt and the reasons.
    second = [r for r in model.requests if r.system == CODER_PROMPT][1]
    assert "print(sum(range(9)))" in str(second.messages[2].content)
    assert "it printed '36', not '45'" in second.last_text
    await runtime.close()


async def test_a_crash_reaches_the_reviewer_with_its_traceback() -> None:
    model = team_model(["total = sum(range(10)) / 0\nprint(total)", "print(sum(range(10)))"])
    runtime, result = await run_task(model, CodingTaskMsg(task=TASK))
    assert result.approved and result.rounds == 2
    [first_run] = [
        ExecutionResultMsg.model_validate(r.message.payload.data)  # type: ignore[union-attr]
        for r in runtime.archive.history("reviewer.local", kinds=[RecordKind.RECEIVED])
        if r.message is not None
    ][:1]
    assert first_run.exit_code == 1 and not first_run.succeeded
    assert 'File "solution.py", line 1' in first_run.stderr
    assert first_run.stderr.endswith("ZeroDivisionError: division by zero")
    reviewer_prompt = next(r for r in model.requests if r.system == REVIEWER_PROMPT).last_text
    assert "Exit code: 1" in reviewer_prompt and "ZeroDivisionError: division by zero" in reviewer_prompt
    await runtime.close()


async def test_a_task_that_never_converges_ends_at_the_round_limit() -> None:
    model = team_model(["print(sum(range(9)))"])  # the same mistake every round
    runtime, result = await run_task(model, CodingTaskMsg(task=TASK, max_rounds=2))
    assert result.status == "round_limit" and not result.approved
    assert result.rounds == 2 and result.stdout == "36\n"
    assert result.reasons == ["it printed '36', not '45'"]
    assert "round limit" in result.summary()
    assert len([r for r in model.requests if r.system == CODER_PROMPT]) == 2
    assert runtime.stats.loop_stops == 0 and runtime.stats.dead_letters == 0
    await runtime.close()


async def test_the_reviewer_default_limit_applies_when_the_task_sets_none() -> None:
    model = team_model(["print(1)"])
    _, result = await run_task(model, CodingTaskMsg(task=TASK), max_rounds=3)
    assert result.status == "round_limit" and result.rounds == 3


async def test_an_endless_program_is_stopped_and_reported() -> None:
    model = team_model(["while True:\n    pass", "print(45)"])
    runtime, result = await run_task(model, CodingTaskMsg(task=TASK), timeout=1)
    first = ExecutionResultMsg.model_validate(
        runtime.archive.history("reviewer.local", kinds=[RecordKind.RECEIVED])[0].message.payload.data  # type: ignore[union-attr]
    )
    assert first.timed_out and "time limit" in first.stderr
    assert result.approved and result.rounds == 2
    await runtime.close()


async def test_a_failed_run_is_never_approved_even_if_the_model_says_so() -> None:
    model = ScriptedChatCompletionClient(
        lambda r: "```python\nraise SystemExit(3)\n```" if r.system == CODER_PROMPT else '{"approved": true}'
    )
    runtime, result = await run_task(model, CodingTaskMsg(task=TASK, max_rounds=1))
    assert result.status == "round_limit" and result.exit_code == 3
    assert result.reasons == ["the program failed: it exited with status 3"]
    await runtime.close()


async def test_an_unreadable_verdict_is_a_rejection_with_the_reason() -> None:
    model = ScriptedChatCompletionClient(
        lambda r: "```python\nprint(45)\n```" if r.system == CODER_PROMPT else "looks fine to me!"
    )
    runtime, result = await run_task(model, CodingTaskMsg(task=TASK, max_rounds=1))
    assert result.status == "round_limit"
    assert result.reasons[0].startswith("the review could not be read: no verdict in the review")
    await runtime.close()


async def test_the_result_goes_back_to_whoever_sent_the_task() -> None:
    runtime = AUNRuntime()
    await register_reflection_team(
        runtime, team_model(["print(45)"]), coder="dev.local", executor="runner.local", reviewer="qa.local"
    )
    alice = await runtime.open_inbox("alice.local")
    bob = await runtime.open_inbox("bob.local")
    await runtime.start()
    await alice.send("dev.local", CodingTaskMsg(task=TASK, task_id="for-alice"))
    await bob.send("dev.local", CodingTaskMsg(task=TASK, task_id="for-bob"))
    await runtime.settle()
    for inbox, task_id in ((alice, "for-alice"), (bob, "for-bob")):
        [message] = inbox.received
        assert message.from_aid == "qa.local"
        assert CodingResultMsg.model_validate(message.payload.data).task_id == task_id  # type: ignore[union-attr]
    await runtime.close()


async def test_generated_code_does_not_see_model_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUN_MODEL_API_KEY", "sk-do-not-leak")
    model = team_model(["import os\nprint(os.environ.get('AUN_MODEL_API_KEY'))"], expected_stdout="None")
    runtime, result = await run_task(model, CodingTaskMsg(task=TASK))
    assert result.approved and result.stdout == "None\n"
    await runtime.close()


async def test_a_malformed_task_is_a_dead_letter_naming_the_field() -> None:
    runtime = AUNRuntime()
    await register_reflection_team(runtime, team_model(["print(45)"]))
    inbox = await runtime.open_inbox()
    await runtime.start()
    await inbox.send(
        "coder.local", {"type": "json", "kind": "aun.reflection.CodingTask", "data": {"task": ""}}
    )
    await runtime.settle()
    [dead] = runtime.archive.dead_letters()
    assert "InvalidMessageError" in (dead.reason or "") and "task" in (dead.reason or "")
    assert inbox.received == []
    await runtime.close()


async def test_the_same_task_gives_the_same_trace_twice() -> None:
    traces = []
    for _ in range(2):
        model = team_model(["print(sum(range(9)))", "x = 1/0", "print(sum(range(10)))"])
        runtime, result = await run_task(model, CodingTaskMsg(task=TASK, task_id="t1"))
        assert result.rounds == 3
        traces.append(runtime.transcript())
        await runtime.close()
    assert traces[0] == traces[1]
    assert "round 2 of t1 ran: exit 1: ZeroDivisionError: division by zero" in traces[0]


def test_contract_wire_names_are_namespaced() -> None:
    names = {
        cls.wire_name for cls in (CodingTaskMsg, CodeGenMsg, ExecutionResultMsg, ReviewMsg, CodingResultMsg)
    }
    assert names == {
        "aun.reflection.CodingTask",
        "aun.reflection.CodeGen",
        "aun.reflection.ExecutionResult",
        "aun.reflection.Review",
        "aun.reflection.CodingResult",
    }


def test_reviewer_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        Reviewer(team_model(["x"]), max_rounds=11)
    with pytest.raises(InvalidAIDError, match="no domain"):
        TaskRef(task_id="t", task="x", requester="not an aid")


async def test_agents_build_their_own_client_from_a_plain_config() -> None:
    # What a worker process gets: plain values, no client object. Here: the notebook's cassette.
    config = ModelConfig(source="cassette", cassette=str(NOTEBOOK_CASSETTE))
    runtime = AUNRuntime()
    await register_reflection_team(runtime, config)
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    task = CodingTaskMsg(task="Print the first 10 Fibonacci numbers, space-separated.", task_id="fib")
    await inbox.send("coder.local", task)
    await runtime.settle()
    [message] = inbox.received
    result = CodingResultMsg.model_validate(message.payload.data)  # type: ignore[union-attr]
    assert result.approved and result.stdout == "0 1 1 2 3 5 8 13 21 34\n"
    await runtime.close()
