"""A turn that fails for a passing cause is tried again, in order, without sending anything twice.

The model is a real OpenAI-compatible server on loopback that answers 500 for a while. Each model
call gives up after its (short) patience with a transient error; the agent's retry policy tries
the turn again, holding its mailbox; what an earlier try already sent is not sent again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from autogen_core.tools import FunctionTool

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNRuntime, RecordKind, TurnRetry
from aun_runtime.models import ModelConfig
from tests.models.openai_stand_in import OpenAIStandIn, Reply, ToolCalls, openai_stand_in

INFO = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
        "structured_output": False, "multiple_system_messages": True}
#: A call gives up after this long; the turn is then tried again after RETRY's backoff.
PATIENCE = 0.6
RETRY = TurnRetry(tries=4, backoff=0.3, max_backoff=0.6)


class Outage:
    """Answers 500 while `down` is set; else asks `answer`."""

    def __init__(self, answer: Any) -> None:
        self.down = threading.Event()
        self.answer = answer

    def __call__(self, body: dict[str, Any]) -> Reply | ToolCalls:
        if self.down.is_set():
            return Reply(status=500)
        result: Reply | ToolCalls = self.answer(body)
        return result


def config(stand_in: OpenAIStandIn) -> ModelConfig:
    return ModelConfig(source="openai", model="stand-in", base_url=stand_in.base_url, model_info=INFO,
                       patience=PATIENCE, backoff=0.1, max_backoff=0.2)


def echo(body: dict[str, Any]) -> ToolCalls:
    question = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    return ToolCalls([("reply", {"text": "re: " + question.rsplit("\n", 1)[-1]})])


async def lookup(query: str) -> str:
    """Look something up."""
    return "found it"


def received(runtime: AUNRuntime, aid: str = "alice.local") -> list[str]:
    return [r.message.text or "" for r in runtime.archive.records(kinds=[RecordKind.RECEIVED])
            if r.owner == aid and r.message is not None]


async def start(stand_in: OpenAIStandIn, retry: TurnRetry | None = RETRY, **agent: Any) -> tuple[AUNRuntime, Any]:
    runtime = AUNRuntime()
    model = config(stand_in)
    await runtime.register_agent("bot.local", lambda: AutonomousAgent(model, turn_retry=retry, **agent))
    human = await runtime.open_inbox("alice.local")
    await runtime.start()
    return runtime, human


async def until_retried(runtime: AUNRuntime) -> None:
    async with asyncio.timeout(30):
        while runtime.stats.turn_retries < 1:  # noqa: ASYNC110 - a counter has no event to wait on
            await asyncio.sleep(0.05)


async def test_an_outage_shorter_than_the_policy_is_ridden_out_in_order() -> None:
    outage = Outage(echo)
    outage.down.set()
    with openai_stand_in(outage) as stand_in:
        runtime, human = await start(stand_in)
        await human.send("bot.local", "first")
        await human.send("bot.local", "second")
        await until_retried(runtime)  # the first turn failed once; the second waits behind it
        outage.down.clear()
        await asyncio.wait_for(runtime.settle(), timeout=60)
    assert received(runtime) == ["re: first", "re: second"]
    assert runtime.stats.dead_letters == 0
    assert runtime.stats.turn_retries >= 1
    await runtime.close()


async def test_a_retried_turn_sends_nothing_twice() -> None:
    # Round one answers "part one" and asks for a tool; round two (after the tool's result) meets
    # the outage, so the turn fails after it sent "part one" and is tried from the start.
    outage = Outage(None)
    rounds: list[float] = []

    def answer(body: dict[str, Any]) -> Reply | ToolCalls:
        if any(m["role"] == "tool" for m in body["messages"]):
            rounds.append(time.monotonic())
            if len(rounds) == 1:
                outage.down.set()  # round two fails until the test lifts the outage
                return Reply(status=500)
            return ToolCalls([("reply", {"text": "part two"})])
        return ToolCalls([("reply", {"text": "part one"}), ("lookup", {"query": "x"})])

    outage.answer = answer
    with openai_stand_in(outage) as stand_in:
        runtime, human = await start(stand_in, tools=[FunctionTool(lookup, description="Look something up.")],
                                     annotate_tools=False)
        await human.send("bot.local", "tell me in two parts")
        await until_retried(runtime)
        outage.down.clear()
        await asyncio.wait_for(runtime.settle(), timeout=60)
    assert received(runtime) == ["part one", "part two"]
    assert runtime.stats.duplicates >= 1  # the second try's "part one", dropped by alice's channel
    assert runtime.stats.dead_letters == 0
    await runtime.close()


async def test_after_the_last_try_the_message_is_a_retryable_dead_letter_with_its_cause() -> None:
    outage = Outage(echo)
    outage.down.set()
    with openai_stand_in(outage) as stand_in:
        runtime, human = await start(stand_in, retry=TurnRetry(tries=2, backoff=0.1))
        await human.send("bot.local", "anyone?")
        await asyncio.wait_for(runtime.settle(), timeout=60)
    assert received(runtime) == []
    [dead] = runtime.archive.dead_letters()
    assert dead.owner == "bot.local" and dead.message is not None and dead.message.text == "anyone?"
    assert (dead.reason or "").startswith("retryable: ModelUnavailableError: ")
    assert "HTTP 500" in (dead.reason or "")
    assert runtime.stats.turn_retries == 1
    await runtime.close()


async def test_an_agent_without_a_policy_is_not_retried_but_its_dead_letter_is_retryable() -> None:
    outage = Outage(echo)
    outage.down.set()
    with openai_stand_in(outage) as stand_in:
        runtime, human = await start(stand_in, retry=None)
        await human.send("bot.local", "anyone?")
        await asyncio.wait_for(runtime.settle(), timeout=60)
    [dead] = runtime.archive.dead_letters()
    assert (dead.reason or "").startswith("retryable: ")
    assert runtime.stats.turn_retries == 0
    await runtime.close()



def test_agents_answering_one_message_derive_ids_of_their_own() -> None:
    # A send's derived id names its sender: two members answering the same group post must not
    # share an id, or every receiver's dedup would keep only the first answer (notebook 08's lounge
    # shows it end to end). The same sender, message and place give the same id on every try.
    from aun_runtime import AUNMessage
    from aun_runtime.delivery._turn_retry import derived_message_id

    post = AUNMessage(from_aid="alice.local", group_id="lounge", payload={"type": "text", "text": "lunch?"})
    assert derived_message_id("ana.local", post, 0) != derived_message_id("ben.local", post, 0)
    assert derived_message_id("ana.local", post, 0) == derived_message_id("ana.local", post, 0)
    assert derived_message_id("ana.local", post, 0) != derived_message_id("ana.local", post, 1)
