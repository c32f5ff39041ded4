"""Model calls and tokens per human message in a broadcast group of 5 model-backed agents, in one run.

A human posts N messages (``--messages``) to a ``broadcast`` group of 5 agents and waits for the
runtime to settle after each. The model is an in-process scripted client, so every model call is
counted exactly and costs nothing; it answers in the shapes a real model takes
(``tests/models/model_shapes.py``). Tokens are estimated as the scripted client does (4 characters
a token): the prompt counts the messages and the tool schemas offered, the completion the text or
the tool call. Scenarios (``<agents>_<model>_guards_<on|off>``):

* ``observers_always_answering_guards_on``: 5 ``ObserverAgent`` on a model that always answers, in
  plain text (which an observer sends), with the default :class:`~aun_runtime.Budgets`.
* ``autonomous_always_answering_guards_on``: 5 ``AutonomousAgent`` on a model that calls ``reply``
  on every turn, with the default budgets.
* ``..._always_answering_guards_off``: the same on ``AUNRuntime(budgets=Budgets.unlimited())``. Only
  the hop guard (32 hops) is left, and it bounds depth, not breadth: every answer reaches 4 members,
  who all answer it. That run would not end in any useful time, so it is **capped**: once ``--cap``
  model calls have been made (or ``--time-limit`` seconds have passed) the runtime is stopped, and
  the run is reported with ``"capped": true``. Its figures per human message are then lower bounds:
  the calls so far over the human messages posted so far (the first one alone reaches the cap). Its
  mailboxes are made large enough for everything it can send before the cap: with the default bound
  (1024) they fill after some 1,700 calls and the members block on each other's full mailboxes until
  the block timeout (30 s), which is backpressure at work, not the model cost measured here.
* ``observers_observer_table_guards_on`` and ``..._guards_off``: 5 ``ObserverAgent`` on the scripted
  model that follows the observer protocol's behaviour table (``agents/stand_ins/observer.py``): a
  member answers when addressed, when an open question is on its topics, or to continue a
  conversation it is in, and is ``__SILENT__`` otherwise. Each member has topics of its own.

The human's messages cycle through a question addressed to one member, a remark that continues that
conversation, an open question on the topics of two members, small talk, and a question addressed to
another member: the same messages in every scenario.

Reported per scenario: per human message, model calls, tokens, and messages the agents sent; for the
run, budget stops and loop stops, and ``turns_skipped_by_budgets``: messages an agent asked its model
nothing about because no answer could have gone out (it had already spoken, unaddressed, in that
thread). That check comes before the model call, so the default budgets mostly show there, not as
budget stops. ``seconds`` is for information only. Ratios: ``guards_off_over_on`` (model calls per
human message without budgets over with them; a lower bound when the guards-off run was capped) and
``always_answering_over_observer_table`` (calls, tokens and agent messages per human message, a
model that always answers over one that follows the observer table, both with the default budgets).
Counts, not seconds: they do not depend on the machine. Prints one JSON line.

Usage: ``python bench/model_cost.py [--messages 10] [--cap 2000] [--time-limit 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage

from agents.autonomous import AutonomousAgent
from agents.observer import ObserverAgent
from agents.stand_ins.observer import DEMO_OBSERVERS, ObserverProfile, ObserverStandIn
from aun_runtime import AUNAgent, AUNRuntime, Budgets, RecordKind
from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient, canonical_json

HUMAN = "alice.local"
GROUP = "team"
#: What the always-answering model says, whatever it is asked (as tests/models/model_shapes.py).
ALWAYS = "I think we should look into this together."
#: The 5 members and what each knows, for the observer-table model.
PROFILES: dict[str, ObserverProfile] = {
    **DEMO_OBSERVERS,
    "ui.local": ObserverProfile(
        topics=("login page", "banner", "button"),
        answer="The login page can show the banner; it is one flag in the page settings.",
        follow_up="I will switch it on after lunch.",
    ),
    "sec.local": ObserverProfile(
        topics=("password", "token", "vulnerability"),
        answer="Rotate the token now; the old one stops working in an hour.",
        follow_up="Tell me once it is done and I will close the ticket.",
    ),
}
MEMBERS = list(PROFILES)
#: The human's messages, in a cycle: (text, the AIDs it names).
SCRIPT: list[tuple[str, list[str]]] = [
    ("db, the orders query is slow. Any idea?", ["db.local"]),
    ("Great, I will add the index then.", []),
    ("When is the next deploy?", []),
    ("Lunch at noon, anyone?", []),
    ("ui, can the login page show a banner about the outage?", ["ui.local"]),
]


def _tokens(text: str) -> int:
    return len(text) // 4


def _usage(request: ModelRequest, completion: str) -> RequestUsage:
    prompt = sum(len(str(m.content)) for m in request.messages)
    prompt += len(canonical_json(request.data["tools"])) if "tools" in request.data else 0
    return RequestUsage(prompt_tokens=prompt // 4, completion_tokens=_tokens(completion))


class CountingModel:
    """A scripted client that counts calls and tokens, and stops answering (silently) at the cap.

    ``shape`` maps a request to text, or to a list of (tool, arguments) calls.
    """

    def __init__(
        self, shape: Callable[[ModelRequest], str | list[tuple[str, dict[str, Any]]]], cap: int
    ) -> None:
        self.shape = shape
        self.cap = cap
        self.calls = 0
        self.tokens = 0
        self.capped = asyncio.Event()
        self.client = ScriptedChatCompletionClient(self._answer)

    def _answer(self, request: ModelRequest) -> CreateResult:
        if self.calls >= self.cap:
            # Past the cap the run is being stopped: say nothing, so that nothing more spreads.
            self.capped.set()
            return CreateResult(
                finish_reason="stop", content="__SILENT__", usage=RequestUsage(0, 0), cached=False
            )
        self.calls += 1
        said = self.shape(request)
        if isinstance(said, str):
            result = CreateResult(
                finish_reason="stop", content=said, usage=_usage(request, said), cached=False
            )
        else:
            calls = [
                FunctionCall(id=f"c{n}", name=name, arguments=json.dumps(args))
                for n, (name, args) in enumerate(said)
            ]
            completion = "".join(call.name + call.arguments for call in calls)
            result = CreateResult(
                finish_reason="function_calls", content=calls, usage=_usage(request, completion), cached=False
            )
        self.tokens += result.usage.prompt_tokens + result.usage.completion_tokens
        if self.calls >= self.cap:
            self.capped.set()
        return result


def always_answers_in_text(request: ModelRequest) -> str:
    return ALWAYS


def always_replies(request: ModelRequest) -> list[tuple[str, dict[str, Any]]]:
    return [("reply", {"text": ALWAYS})]


@dataclass(frozen=True)
class Scenario:
    agent: Callable[[CountingModel], AUNAgent]
    shape: Callable[[ModelRequest], str | list[tuple[str, dict[str, Any]]]]
    guards: bool


def observer(model: CountingModel) -> AUNAgent:
    return ObserverAgent(model.client)


def autonomous(model: CountingModel) -> AUNAgent:
    return AutonomousAgent(model.client)


SCENARIOS = {
    "observers_always_answering_guards_on": Scenario(observer, always_answers_in_text, True),
    "observers_always_answering_guards_off": Scenario(observer, always_answers_in_text, False),
    "autonomous_always_answering_guards_on": Scenario(autonomous, always_replies, True),
    "autonomous_always_answering_guards_off": Scenario(autonomous, always_replies, False),
    "observers_observer_table_guards_on": Scenario(observer, ObserverStandIn(dict(PROFILES)), True),
    "observers_observer_table_guards_off": Scenario(observer, ObserverStandIn(dict(PROFILES)), False),
}


def _turns_skipped_by_budgets(runtime: AUNRuntime) -> int:
    """Messages an agent took no model call for because no answer could go out (its thought names
    the budget, in the words of the ledger's refusal)."""
    return sum(
        1
        for record in runtime.archive.records(kinds=[RecordKind.THOUGHT])
        if any(f"({budget}=" in (record.text or "") for budget in ("unaddressed_replies", "thread_messages"))
    )


async def run(scenario: Scenario, messages: int, cap: int, time_limit: float) -> dict[str, Any]:
    model = CountingModel(scenario.shape, cap)
    if scenario.guards:
        runtime = AUNRuntime(budgets=Budgets())
    else:
        # Room for every message the run can send before the cap (each call sends at most one; past
        # the cap the model is silent). With the default bound the members' mailboxes fill and each
        # blocks sending into another's until the block timeout: backpressure, not model cost.
        runtime = AUNRuntime(budgets=Budgets.unlimited(), mailbox_capacity=cap + messages)
    for aid in MEMBERS:
        await runtime.register_agent(aid, lambda: scenario.agent(model))
    human = await runtime.open_inbox(HUMAN)
    await runtime.create_group(GROUP, [*MEMBERS, HUMAN])
    await runtime.start()
    start = time.perf_counter()
    posted = 0
    capped: str | None = None  # what stopped the run early: "calls" or "time"
    capped_wait = asyncio.ensure_future(model.capped.wait())
    try:
        for n in range(messages):
            text, mentions = SCRIPT[n % len(SCRIPT)]
            await human.group_send(GROUP, text, mentions=mentions)
            posted += 1
            settled = asyncio.ensure_future(runtime.settle())
            left = time_limit - (time.perf_counter() - start)
            done, _ = await asyncio.wait(
                {settled, capped_wait}, timeout=max(left, 0), return_when=asyncio.FIRST_COMPLETED
            )
            if settled not in done:
                settled.cancel()
                await asyncio.gather(settled, return_exceptions=True)
                capped = "calls" if model.capped.is_set() else "time"
                break
    finally:
        capped_wait.cancel()
        elapsed = time.perf_counter() - start
        sent_by_agents = runtime.stats.sent - posted
        skipped = _turns_skipped_by_budgets(runtime)
        stats = runtime.stats
        await runtime.close()
    if not capped and model.calls != len(model.client.requests):
        raise AssertionError(
            f"counted {model.calls} model calls, the client was asked {len(model.client.requests)}"
        )
    result: dict[str, Any] = {
        "human_messages": posted,
        "calls_per_message": round(model.calls / posted, 2),
        "tokens_per_message": round(model.tokens / posted),
        "agent_messages_per_message": round(sent_by_agents / posted, 2),
        "budget_stops": stats.budget_stops,
        "turns_skipped_by_budgets": skipped,
        "loop_stops": stats.loop_stops,
        "model_calls": model.calls,
        "capped": capped is not None,
        "capped_by": capped,
        "seconds": round(elapsed, 1),
    }
    return result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--cap", type=int, default=2_000, help="model calls after which a run is stopped")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds after which a run is stopped")
    parser.add_argument(
        "--only", nargs="*", choices=sorted(SCENARIOS), help="scenarios to run (default: all)"
    )
    args = parser.parse_args()
    # Budget stops, loop stops and the messages a capped run leaves undelivered are counted in the
    # results; thousands of warnings about them would say nothing more.
    logging.getLogger("aun_runtime").setLevel(logging.ERROR)

    names = args.only or list(SCENARIOS)
    results = {name: await run(SCENARIOS[name], args.messages, args.cap, args.time_limit) for name in names}

    def per_message(name: str, figure: str) -> float | None:
        return results[name][figure] if name in results else None

    guards_off_over_on: dict[str, Any] = {}
    for agents in ("observers_always_answering", "autonomous_always_answering", "observers_observer_table"):
        on = per_message(f"{agents}_guards_on", "calls_per_message")
        off = per_message(f"{agents}_guards_off", "calls_per_message")
        if on and off is not None:
            guards_off_over_on[agents] = {
                "calls": round(off / on, 1),
                "lower_bound": results[f"{agents}_guards_off"]["capped"],
            }
    always_over_table: dict[str, Any] = {}
    for agents in ("observers", "autonomous"):
        always, table = f"{agents}_always_answering_guards_on", "observers_observer_table_guards_on"
        if always in results and table in results:
            always_over_table[agents] = {
                figure.removesuffix("_per_message"): round(
                    results[always][figure] / results[table][figure], 2
                )
                for figure in ("calls_per_message", "tokens_per_message", "agent_messages_per_message")
                if results[table][figure]
            }
    ratios = {
        "guards_off_over_on": guards_off_over_on,
        "always_answering_over_observer_table": always_over_table,
    }
    print(
        json.dumps(
            {
                "bench": "model_cost",
                "unit": "per human message",
                "messages": args.messages,
                "members": len(MEMBERS),
                "cap": args.cap,
                "python": sys.version.split()[0],
                "results": results,
                "ratios": ratios,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
