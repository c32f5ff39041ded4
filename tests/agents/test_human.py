"""`HumanAgent`: a person at an AID answers, stays silent, speaks to anyone, or walks away."""

from __future__ import annotations

import asyncio
import io

from agents.human import HumanAgent, ScriptedInput
from aun_runtime import AUNRuntime, RecordKind, ToolCallPayload, ToolResultPayload


class NeverTyped:
    """A person who never types anything."""

    shows_input = False

    async def read_line(self) -> str | None:
        await asyncio.Event().wait()
        return None


async def test_a_person_answers_stays_silent_speaks_to_anyone_and_walks_away() -> None:
    screen = io.StringIO()
    lines = ["Tuesday", "", "/send ben.local lunch?", "/post crew hello all", "/send nobody.local hi", "/quit"]
    async with AUNRuntime() as runtime:
        await runtime.register_agent("me.local", lambda: HumanAgent(ScriptedInput(lines), out=screen))
        ana = await runtime.open_inbox("ana.local")
        ben = await runtime.open_inbox("ben.local")
        await runtime.create_group("crew", ["me.local", "ana.local", "ben.local"])
        asked = await ana.send("me.local", "When is the release?")
        await ana.send("me.local", "Thanks.")
        await ana.group_send("crew", "me, lunch plans?", mentions=["me.local"])
        await ana.send("me.local", "And coffee?")
        await ana.send("me.local", "Anyone?")
        await ana.send("me.local", "Still there?")
        await ana.group_send("crew", "me?", mentions=["me.local"])
        await runtime.settle()
    assert [m.text for m in ana.replies_to(asked)] == ["Tuesday"]
    assert [m.text for m in ben.received if m.from_aid == "me.local"] == ["lunch?", "hello all"]
    shown = screen.getvalue().splitlines()
    assert shown[:4] == ["ana.local: When is the release?", "> Tuesday", "ana.local: Thanks.", "> (nothing)"]
    assert "#crew ana.local: me, lunch plans?" in shown
    assert any(line.startswith("(not sent: ") and "nobody.local" in line for line in shown)
    # After /quit the person is shown what arrives, and asked nothing more.
    assert shown[-3:] == ["ana.local: Still there?", "> /quit", "#crew ana.local: me?"], "\n".join(shown)
    assert runtime.stats.dead_letters == 1  # the message to nobody.local, archived as undeliverable


async def test_a_person_who_does_not_answer_has_said_nothing_and_the_next_message_comes() -> None:
    screen = io.StringIO()
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            "me.local", lambda: HumanAgent(NeverTyped(), out=screen, answer_timeout=0.05)
        )
        ana = await runtime.open_inbox("ana.local")
        await ana.send("me.local", "one")
        await ana.send("me.local", "two")
        await runtime.settle()
        thoughts = [r.text for r in runtime.archive.records(kinds=[RecordKind.THOUGHT])]
    assert screen.getvalue().splitlines() == [
        "ana.local: one", "> (no answer within 0.05 s: said nothing)",
        "ana.local: two", "> (no answer within 0.05 s: said nothing)",
    ]
    assert thoughts == ["no answer within 0.05 s"] * 2
    assert ana.received == []


async def test_tool_notes_are_shown_and_not_asked_about() -> None:
    screen = io.StringIO()
    async with AUNRuntime() as runtime:
        await runtime.register_agent("me.local", lambda: HumanAgent(ScriptedInput(["ok"]), out=screen))
        tools = await runtime.open_inbox("tools.local")
        await tools.send("me.local", ToolCallPayload(call_id="1", name="search"))
        await tools.send("me.local", ToolResultPayload(call_id="1", ok=True, result="3 hits"))
        await tools.send("me.local", "Found 3.")
        await runtime.settle()
    assert screen.getvalue().splitlines() == [
        "(tools.local used its tool search)", "(tools.local got its tool's result)", "tools.local: Found 3.", "> ok",
    ]
