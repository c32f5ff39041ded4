"""Stand-in model for autonomous agents: it thinks in text and speaks only by calling send tools.

It plays the cast of the autonomous-agent notebook, reading who is asked (the AID its system prompt
names) and what the new message says:

* `helper.local` answers questions once, or twice, or not at all; promises to come back and keeps
  the promise with a follow-up; works sums out with its calculator before it answers; asks
  `planner.local` what it does not know and passes the answer on.
* the members of `#lounge` always have two things to say;
* `looper.local` checks its sums again, and again, for as long as it is let;
* `planner` (an agentchat `AssistantAgent`) knows the release dates.
"""

from __future__ import annotations

import json
import re
from typing import Any

from autogen_core import FunctionCall
from autogen_core.models import CreateResult, FunctionExecutionResultMessage, RequestUsage

from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

__all__ = ["autonomous_agents"]

#: The chatty members of #lounge and their two things to say.
LOUNGE = {
    "ana.local": ("Friday works for me.", "Also, can we do pizza again?"),
    "ben.local": ("Count me in.", "I can bring the board games."),
    "cy.local": ("Sounds good.", "Shall I book the room?"),
}


def _calls(*calls: tuple[str, dict[str, Any]], prefix: str) -> CreateResult:
    content = [
        FunctionCall(id=f"{prefix}-{n}", name=name, arguments=json.dumps(arguments, sort_keys=True))
        for n, (name, arguments) in enumerate(calls, start=1)
    ]
    return CreateResult(
        finish_reason="function_calls", content=content, usage=RequestUsage(20, 10), cached=False
    )


def _new_message(request: ModelRequest) -> tuple[str, str]:
    """(sender, text) of the message the turn is about ('' for a follow-up or a tool round)."""
    found = re.match(r"New message from (\S+) \([^)]*\):\n(.*)", request.last_text, re.DOTALL)
    return (found.group(1), found.group(2)) if found else ("", "")


def _helper(request: ModelRequest) -> str | CreateResult:
    last = request.messages[-1]
    if isinstance(last, FunctionExecutionResultMessage):  # the calculator answered
        result = last.content[0].content
        return _calls(("reply", {"text": f"You need {result} GB of disk in all."}), prefix="answer")
    if "Your follow-up is due" in request.last_text:
        return _calls(
            ("reply", {"text": "Last night's backup finished at 02:14; all three databases are in it."}),
            prefix="promise",
        )
    sender, text = _new_message(request)
    said = text.lower()
    if sender == "planner.local":
        return _calls(
            ("send_message", {"to": "alice.local", "text": f"planner.local says: {text}"}), prefix="relay"
        )
    if "port" in said:
        return _calls(("reply", {"text": "Billing listens on port 8443."}), prefix="port")
    if "on-call" in said:
        return _calls(
            ("reply", {"text": "This week dana.local is on call."}),
            ("reply", {"text": "If Dana does not answer within 15 minutes, page ops-lead.local."}),
            prefix="oncall",
        )
    if "backup" in said:
        return _calls(
            ("reply", {"text": "On it: I will check last night's backup and come back to you."}),
            (
                "follow_up",
                {"after_seconds": 0.2, "note": "tell alice.local whether last night's backup finished"},
            ),
            prefix="backup",
        )
    if "replica" in said:
        return _calls(("calculate", {"expression": "3 * 120 * 1.2"}), prefix="sum")
    if "release" in said:
        return _calls(
            ("send_message", {"to": "planner.local", "text": "When does the next release go out?"}),
            prefix="ask",
        )
    return f"{sender} is telling me something, not asking: nothing to answer, but worth remembering."


def _looper(request: ModelRequest) -> CreateResult:
    rounds = sum(isinstance(m, FunctionExecutionResultMessage) for m in request.messages)
    return _calls(("calculate", {"expression": "17 * 23"}), prefix=f"check{rounds + 1}")


def _respond(request: ModelRequest) -> str | CreateResult:
    system = request.system
    if system.startswith("You are the release planner"):
        return "Release 2.4 goes out on Thursday at 10:00."
    asker = re.match(r"You are (\S+), an autonomous agent", system)
    aid = asker.group(1) if asker else ""
    if aid == "helper.local":
        return _helper(request)
    if aid == "looper.local":
        return _looper(request)
    if aid in LOUNGE:
        first, second = LOUNGE[aid]
        return _calls(("reply", {"text": first}), ("reply", {"text": second}), prefix="chat")
    return "Nothing I should answer."


def autonomous_agents() -> ScriptedChatCompletionClient:
    """The stand-in for the autonomous-agent notebook."""
    return ScriptedChatCompletionClient(_respond)
