"""Stand-in model for the debate: solvers that compute the answer, one hasty one that slips in round
one and comes round once it reads its neighbours."""

from __future__ import annotations

import re
from collections import Counter

from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

__all__ = ["debate"]


def _respond(request: ModelRequest) -> str:
    text = request.last_text
    numbers = [int(n) for n in re.findall(r"\d+", text.split("\n\n")[0])]
    morning = numbers[0] if numbers else 0
    right = morning + 2 * morning
    if "Other agents' answers:" in text:
        theirs = re.findall(r"ANSWER: (\S+)", text.split("Other agents' answers:")[1])
        mine = re.findall(r"ANSWER: (\S+)", text.split("Other agents' answers:")[0])
        votes = Counter([*theirs, *mine])
        best = max(sorted(votes), key=lambda answer: votes[answer])
        return f"Having read the other solutions, morning {morning} plus afternoon {2 * morning}.\nANSWER: {best}"
    if "hasty" in request.system:
        return f"Twice {morning} is {2 * morning}.\nANSWER: {2 * morning}"
    return f"Morning {morning}, afternoon twice that: {2 * morning}. Together {right}.\nANSWER: {right}"


def debate() -> ScriptedChatCompletionClient:
    """The stand-in for the debate notebook."""
    return ScriptedChatCompletionClient(_respond)
