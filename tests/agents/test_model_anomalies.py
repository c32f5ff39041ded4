"""Malformed answers are answers too: each is handled as before and put on the record.

A real OpenAI-compatible server on loopback answers, in turn, with no `choices`, with a message of
neither text nor tool calls, with tool arguments that are not JSON and with a tool that does not
exist. Before, an empty `choices` was a dead letter with a 20-line traceback, and the others left
no trace anywhere.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from agents.autonomous import AutonomousAgent
from aun_runtime import DEFAULT_TURN_RETRY, AUNRuntime, RecordKind, TurnRetry
from aun_runtime.models import ModelConfig
from tests.models.openai_stand_in import OpenAIStandIn, Reply, ToolCalls, openai_stand_in

INFO = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
        "structured_output": False, "multiple_system_messages": True}


def completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def tool_call(name: str, arguments: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


class Script:
    """Answers the n-th request with the n-th reply; the last one after that."""

    def __init__(self, *replies: Reply | ToolCalls | str) -> None:
        self.replies = list(replies)
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply | ToolCalls | str:
        with self.lock:
            return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


def config(stand_in: OpenAIStandIn) -> ModelConfig:
    return ModelConfig(source="openai", model="stand-in", base_url=stand_in.base_url, model_info=INFO, backoff=0.05)


async def one_question(script: Script, retry: TurnRetry | None = DEFAULT_TURN_RETRY) -> AUNRuntime:
    with openai_stand_in(script) as stand_in:
        runtime = AUNRuntime()
        model = config(stand_in)
        await runtime.register_agent("bot.local", lambda: AutonomousAgent(model, turn_retry=retry))
        human = await runtime.open_inbox("alice.local")
        await runtime.start()
        await human.send("bot.local", "hello?")
        await asyncio.wait_for(runtime.settle(), timeout=60)
    return runtime


def anomalies(runtime: AUNRuntime) -> list[str]:
    return [r.reason or "" for r in runtime.archive.records(kinds=[RecordKind.MODEL_ANOMALY])]


def answered(runtime: AUNRuntime) -> list[str]:
    return [r.message.text or "" for r in runtime.archive.records(kinds=[RecordKind.RECEIVED])
            if r.owner == "alice.local" and r.message is not None]


REPLY = ToolCalls([("reply", {"text": "here I am"})])


async def test_an_empty_choices_is_asked_again_and_recorded() -> None:
    runtime = await one_question(Script(Reply(body={**completion({}), "choices": []}), REPLY))
    assert answered(runtime) == ["here I am"]
    assert runtime.stats.dead_letters == 0
    [anomaly] = anomalies(runtime)
    assert "not a completion" in anomaly and "IndexError" in anomaly
    assert runtime.stats.model_anomalies == 1
    assert "!! MODEL ANOMALY for bot.local" in runtime.transcript()
    await runtime.close()


async def test_a_model_that_keeps_answering_nothing_readable_gives_up_with_a_clear_error() -> None:
    runtime = await one_question(Script(Reply(body={**completion({}), "choices": []})), TurnRetry(2, 0.1))
    assert answered(runtime) == []
    assert len(anomalies(runtime)) == 2 * 3  # the first answer and its two answer retries, on each try of the turn
    [dead] = runtime.archive.dead_letters()
    assert (dead.reason or "").startswith("retryable: ModelAnswerError: ")
    assert "not a completion" in (dead.reason or "")
    await runtime.close()


async def test_an_answer_of_neither_text_nor_tool_calls_is_silence_on_the_record() -> None:
    runtime = await one_question(Script(Reply(body=completion({"role": "assistant", "content": None}))))
    assert answered(runtime) == []
    assert anomalies(runtime) == ["an answer with neither text nor tool calls"]
    assert runtime.stats.dead_letters == 0
    await runtime.close()


async def test_unreadable_arguments_and_unknown_tools_are_fed_back_and_recorded() -> None:
    script = Script(
        Reply(body=tool_call("reply", "{not json")),
        Reply(body=tool_call("teleport", "{}")),
        REPLY,
    )
    runtime = await one_question(script)
    assert answered(runtime) == ["here I am"]
    found = anomalies(runtime)
    assert len(found) == 2 and runtime.stats.model_anomalies == 2
    assert "'reply' with arguments that are not a JSON object" in found[0]
    assert "does not exist: 'teleport'" in found[1]
    await runtime.close()


#: The bad day after the storm: each request gets the next of these, round and round.
BAD_DAY = ("500", "empty", "slow", "503", "ok")
#: A slow answer, as a loaded server gives one (the agent's mailbox is held meanwhile).
SLOW = 8.0
#: The storm before it: 429 to everything for this long, `Retry-After: 1`.
STORM = 1.5


class BadDay:
    """A short storm of 429s, then 500s, empty `choices`, slow answers and 503s mixed in with answers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: float | None = None
        self.served: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        now = time.monotonic()
        with self.lock:
            self.started = self.started or now
            if now - self.started < STORM:
                kind = "429"
            else:
                kind = BAD_DAY[sum(1 for served in self.served if served != "429") % len(BAD_DAY)]
            self.served.append(kind)
        return {
            "429": Reply(status=429, headers={"Retry-After": "1"}),
            "500": Reply(status=500),
            "empty": Reply(body={**completion({}), "choices": []}),
            "slow": Reply(answer=REPLY, delay=SLOW),
            "503": Reply(status=503, headers={"Retry-After": "0.2"}),
            "ok": Reply(answer=REPLY),
        }[kind]


async def test_after_a_storm_500s_empty_answers_and_slow_answers_lose_nothing() -> None:
    bad_day = BadDay()
    seen_waiting: set[str] = set()

    async def watch(runtime: AUNRuntime) -> None:
        while True:
            seen_waiting.update(f"{b.aid} {b.waiting_for}" for b in runtime.busy() if (b.waiting_seconds or 0) >= 2)
            await asyncio.sleep(0.2)

    with openai_stand_in(bad_day) as stand_in:
        runtime = AUNRuntime()
        model = config(stand_in)
        for n in range(5):
            await runtime.register_agent(f"b{n}.local", lambda: AutonomousAgent(model))
        human = await runtime.open_inbox("alice.local")
        await runtime.start()
        watcher = asyncio.create_task(watch(runtime))
        for n in range(5):
            await human.send(f"b{n}.local", "status?")
        await asyncio.wait_for(runtime.settle(), timeout=90)
        watcher.cancel()
    served = bad_day.served
    assert {"429", "500", "empty", "slow", "503"} <= set(served), served  # the whole bad day was met
    assert sorted(r.message.from_aid for r in runtime.archive.records(kinds=[RecordKind.RECEIVED])
                  if r.owner == "alice.local" and r.message is not None) == [f"b{n}.local" for n in range(5)]
    assert runtime.stats.dead_letters == 0 and runtime.archive.dead_letters() == []
    # Each anomaly on the record: every unreadable answer an anomaly of the agent that asked, every
    # failed request a retry counted, every slow answer an agent seen waiting for its model.
    found = runtime.archive.records(kinds=[RecordKind.MODEL_ANOMALY])
    assert len(found) == served.count("empty") == runtime.stats.model_anomalies
    assert all("not a completion" in (r.reason or "") and r.owner.startswith("b") for r in found)
    assert runtime.stats.model_retries == sum(served.count(kind) for kind in ("429", "500", "503"))
    assert sum(1 for seen in seen_waiting if seen.endswith(" model")) >= 1, seen_waiting
    await runtime.close()
