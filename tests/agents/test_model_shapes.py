"""Whatever shape the model takes, conversations end by themselves, within the budgets.

Each shape is a real-model behaviour served by the loopback stand-in over real HTTP (see
tests/models/model_shapes.py): one that always answers, one that always calls the reply tool twice,
one that calls a local tool forever, one that always answers ``__SILENT__``. Before the budgets, the
demo on the always-answering one made thousands of model calls and never ended.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_core.tools import FunctionTool

from agents.autonomous import AutonomousAgent
from agents.observer import ObserverAgent
from aun_runtime import AUNAgent, AUNRuntime, RecordKind
from aun_runtime.models import model_client_from_env
from tests.models import model_shapes
from tests.models.openai_stand_in import OpenAIStandIn, openai_stand_in

SHAPES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "always answers": model_shapes.always_answers,
    "replies twice": model_shapes.replies_twice,
    "uses a tool forever": model_shapes.uses_tool_forever("lookup"),
    "silent": model_shapes.silent,
}
MEMBERS = [f"m{n}.local" for n in range(5)]
#: Messages the demo sends from outside any agent (its four scenes: 4, 1, 4 and 3).
DEMO_HUMAN_MESSAGES = 12


@pytest.fixture(params=sorted(SHAPES))
def server(request: pytest.FixtureRequest) -> Iterator[OpenAIStandIn]:
    with openai_stand_in(SHAPES[request.param]) as stand_in:
        yield stand_in


def client_for(server: OpenAIStandIn) -> Any:
    env = {"AUN_MODEL": "stand-in", "AUN_MODEL_BASE_URL": server.base_url, "AUN_MODEL_API_KEY": "sk-local"}
    return model_client_from_env(environ=env)


async def lookup(query: str) -> str:
    """Look something up."""
    return f"nothing found for {query}"


def autonomous(model: Any) -> AUNAgent:
    return AutonomousAgent(model, tools=[FunctionTool(lookup, description="Look something up.")])


@pytest.mark.parametrize("make", [autonomous, ObserverAgent], ids=["autonomous", "observer"])
async def test_a_five_member_broadcast_group_ends_within_the_budgets(
    server: OpenAIStandIn, make: Callable[[Any], AUNAgent]
) -> None:
    model = client_for(server)
    runtime = AUNRuntime()
    for aid in MEMBERS:
        await runtime.register_agent(aid, lambda: make(model))
    human = await runtime.open_inbox("alice.local")
    await runtime.create_group("room", [*MEMBERS, "alice.local"])
    await runtime.start()

    for text, mentions in (("Morning, all.", None), ("m2, can you check the logs?", ["m2.local"])):
        await human.group_send("room", text, mentions=mentions)
        await asyncio.wait_for(runtime.settle(), timeout=60)

    # At most one turn of max_rounds (4) model calls per member per human message, and at most one
    # more for the one addressed, who may answer the answers it gets.
    assert len(server.requests) <= 2 * 5 * 4 + 4
    said = [
        r
        for r in runtime.archive.records(kinds=[RecordKind.SENT])
        if r.message and r.message.from_aid in MEMBERS
    ]
    texts = [r for r in said if r.message and r.message.text is not None]
    assert len(texts) <= 2 * 5 + 2
    assert runtime.stats.loop_stops == 0 and runtime.stats.dead_letters == 0
    await runtime.close()


async def test_the_demo_ends_by_itself_and_says_which_model_it_used(
    server: OpenAIStandIn, tmp_path: Path
) -> None:
    env = {"AUN_MODEL": "stand-in", "AUN_MODEL_BASE_URL": server.base_url, "AUN_MODEL_API_KEY": "sk-local"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aun_runtime",
        "demo",
        "--archive",
        str(tmp_path / "demo.sqlite"),
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, err.decode()[-2000:]
    text = out.decode()
    assert f"model: model 'stand-in' at {server.base_url}" in text
    # A few model calls per human message, not thousands.
    assert len(server.requests) <= 5 * DEMO_HUMAN_MESSAGES, len(server.requests)
    assert "0 dead letters" in text
