"""The demo: the autonomous semantics, a reflection team and an observer group chat, on the embedded
runtime.

Run it with `aun-runtime demo` (or `aun-runtime run agents.demo:app`). It shows

* an agent that answers twice (one message, two replies),
* an agent that stays silent (its message shows as delivered, not as an error),
* an agent that speaks first, with nobody having written to it,
* a group in `mention` mode, where what does not name an agent is archived, not shown to it,
* a reflection team (Coder, Executor, Reviewer) writing a program, really running it, and fixing it
  after review,
* observers in a group chat that speak when addressed or when the talk is theirs, and otherwise keep
  silent,
* a model-backed agent whose model only thinks, and which speaks by calling its send tools: twice
  to one question, not at all to a remark, and after using its calculator (the use shown as
  `tool_call` / `tool_result` annotations).

Offline (the default) the model is a deterministic stand-in. Set `AUN_MODEL` (with
`AUN_MODEL_BASE_URL` and `AUN_MODEL_API_KEY`) to run the same scenes against a real model.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from autogen_core.models import ChatCompletionClient

from aun_runtime import AUNAgent, AUNRuntime, RecordKind
from aun_runtime.models import ModelConfig, model_client_from_env
from protocols.reflection import CodingTaskMsg

from . import stand_ins
from .autonomous import AutonomousAgent
from .calculator import calculator
from .echo import EchoTwice, Quiet
from .observer import ObserverAgent
from .reflection import register_reflection_team

__all__ = [
    "LEGEND",
    "SCENES",
    "app",
    "autonomous_scene",
    "legend",
    "model_agent_scene",
    "model_line",
    "observer_scene",
    "reflection_scene",
]


class Herald(AUNAgent):
    """Opens the day in the lobby on its own, asking the echo agent by name."""

    async def on_start(self) -> None:
        await self.group_send("lobby", "Good morning, lobby! twice, are you up?", mentions=["twice.local"])


def model_line() -> str:
    """Which model the demo talks to, in one line."""
    if os.environ.get("AUN_MODEL") or os.environ.get("AUN_MODEL_CLIENT"):
        return "model: " + ModelConfig.from_env().describe()
    return "model: the demo's deterministic stand-in (offline; set AUN_MODEL to use a real one)"


def demo_model(stand_in: Callable[[], ChatCompletionClient]) -> ChatCompletionClient:
    """The configured model if there is one (`AUN_MODEL` or `AUN_MODEL_CLIENT`), else `stand_in`."""
    if os.environ.get("AUN_MODEL") or os.environ.get("AUN_MODEL_CLIENT"):
        return model_client_from_env()
    return stand_in()


async def autonomous_scene(runtime: AUNRuntime) -> None:
    """Two replies, silence, a proactive agent and a mention-mode group."""
    await runtime.register_agent("twice.local", EchoTwice)
    await runtime.register_agent("quiet.local", Quiet)
    inbox = await runtime.open_inbox("app.local")
    await runtime.create_group(
        "lobby", ["twice.local", "quiet.local", "herald.local", "app.local"], dispatch_mode="mention"
    )
    await runtime.register_agent("herald.local", Herald)  # speaks as soon as it exists

    await inbox.send("twice.local", "Can you hear me?")
    await inbox.send("quiet.local", "Anyone home?")
    await inbox.group_send("lobby", "Lunch at noon, for whoever reads this.")
    await inbox.group_send("lobby", "quiet, any objections?", mentions=["quiet.local"])
    await runtime.settle()


async def reflection_scene(runtime: AUNRuntime) -> None:
    """A Coder, an Executor and a Reviewer; the first attempt is wrong, the second is approved."""
    await register_reflection_team(runtime, demo_model(stand_ins.reflection_team))
    if not runtime.is_local("app.local"):
        await runtime.open_inbox("app.local")
    task = CodingTaskMsg(task="Print the first 10 Fibonacci numbers, space-separated.", task_id="fib")
    await runtime.send("coder.local", task, sender="app.local")
    await runtime.settle()


async def observer_scene(runtime: AUNRuntime) -> None:
    """Three observers in a broadcast group: who speaks, and who keeps silent, message by message."""
    model = demo_model(stand_ins.observer_group)
    personas = {
        "db.local": "You look after the databases.",
        "ops.local": "You run the deploys.",
        "sre.local": "You keep production healthy.",
    }
    for aid, persona in personas.items():
        await runtime.register_agent(aid, lambda p=persona: ObserverAgent(model, persona=p))
    alice = await runtime.open_inbox("alice.local")
    await runtime.create_group("standup", [*personas, "alice.local"])
    for text, mentions in (
        ("Lunch at noon, anyone?", None),
        ("db, the orders query is slow. Any idea?", ["db.local"]),
        ("Great, I will add the index then.", None),
        ("ops, when is the deploy?", ["ops.local"]),
    ):
        await alice.group_send("standup", text, mentions=mentions)
        await runtime.settle()


async def model_agent_scene(runtime: AUNRuntime) -> None:
    """A model that thinks in text and speaks only through send tools, with a local tool of its own."""
    model = demo_model(stand_ins.autonomous_agents)
    await runtime.register_agent(
        "helper.local",
        lambda: AutonomousAgent(
            model,
            instructions="You answer the team's questions about its services. Use your calculator for sums.",
            tools=[calculator],
        ),
    )
    if not runtime.is_local("alice.local"):  # the observer scene opened it, when it ran first
        await runtime.open_inbox("alice.local")
    for text in (
        "Who is on-call this week, and who do I escalate to?",
        "FYI: I am out of office on Friday.",
        "How much disk do 3 replicas of a 120 GB database need, with 20% headroom?",
    ):
        await runtime.send("helper.local", text, sender="alice.local")
        await runtime.settle()


Scene = Callable[[AUNRuntime], Awaitable[None]]

SCENES: tuple[tuple[str, Scene], ...] = (
    ("Autonomous semantics: two replies, silence, a proactive agent, a mention-mode group", autonomous_scene),
    ("A reflection team: Coder, Executor and Reviewer write, run and fix a program", reflection_scene),
    ("Observers in a group chat: who speaks, and who keeps silent", observer_scene),
    ("A model-backed agent: it speaks through send tools and uses its calculator", model_agent_scene),
)

LEGEND = """\
How to read the transcript:
  #N                message number N, in the order sent; replies are indented under what they answer
  #lobby, #standup  a group (a name after #), not an agent: the message went to its members
  [re #N]           this message answers message #N
  [proactive]       an agent spoke on its own, answering nothing
  @aid              an agent the message mentions (in a mention-mode group, only they are shown it)
  (aid thinks: ...) what an agent only thought: archived, never sent
  filtered for ...  members whose channel kept the message from them: archived, never shown to their model
  no reply          delivered, and nobody answered: silence is a legal answer, not an error
  !! DEAD LETTER    a message that could not be delivered or handled: a real failure
  !! LOOP GUARD     a conversation the loop guard stopped
  !! BUDGET STOP    an agent its budget stopped (model calls, tokens, messages)"""


def legend(starts: list[int]) -> str:
    """The legend, then the scenes and the message number each starts at."""
    scenes = [
        f"  {i}. {title} (from #{start})"
        for i, ((title, _), start) in enumerate(zip(SCENES, starts, strict=True), 1)
    ]
    return "\n".join([LEGEND, "Scenes:", *scenes, ""])


def _messages_sent(runtime: AUNRuntime) -> int:
    return runtime.archive.count(kind=RecordKind.SENT)


async def app(runtime: AUNRuntime) -> None:
    """Play the four scenes, one after the other, and let everything settle; then print how to read
    the transcript (printed after the application ends) and where each scene starts in it."""
    print(model_line())
    starts = []
    for _, scene in SCENES:
        starts.append(_messages_sent(runtime) + 1)
        await scene(runtime)
    print(legend(starts))
