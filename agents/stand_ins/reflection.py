"""Stand-in model for the reflection team: a Coder that gets some tasks right on the second try, and
a Reviewer that approves exactly when the real run printed what the task expects."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

__all__ = ["EXERCISES", "CodingExercise", "reflection_team"]


@dataclass(frozen=True)
class CodingExercise:
    """A task the stand-in Coder knows: its attempts, round by round, and the output that is right."""

    keyword: str
    attempts: tuple[str, ...]
    expected: str


EXERCISES = (
    CodingExercise(
        "fibonacci",
        (
            "a, b = 1, 1\nnumbers = []\nfor _ in range(10):\n    numbers.append(a)\n    a, b = b, a + b\n"
            "print(' '.join(map(str, numbers)))",
            "a, b = 0, 1\nnumbers = []\nfor _ in range(10):\n    numbers.append(a)\n    a, b = b, a + b\n"
            "print(' '.join(map(str, numbers)))",
        ),
        "0 1 1 2 3 5 8 13 21 34",
    ),
    CodingExercise(
        "mean",
        (
            "values = [3, 5, 10]\nprint(round(sum(values) / len(value), 2))",
            "values = [3, 5, 10]\nprint(round(sum(values) / len(values), 2))",
        ),
        "6.0",
    ),
    CodingExercise(
        "largest prime",
        ("print(max(n for n in range(2, 100) if all(n % d for d in range(2, n)) and n % 10 == 9))",),
        "97",
    ),
)


def _exercise(text: str) -> CodingExercise | None:
    lowered = text.lower()
    return next((e for e in EXERCISES if e.keyword in lowered), None)


def _respond(request: ModelRequest) -> str:
    first = str(request.messages[1].content) if len(request.messages) > 1 else ""
    exercise = _exercise(first)
    if request.system.startswith("You are a programmer."):
        if exercise is None:
            return "```python\nprint('I do not know how to do that yet')\n```"
        rejected = re.search(r"Your program \(round (\d+)\) was rejected", request.last_text)
        round_ = int(rejected.group(1)) + 1 if rejected else 1
        code = exercise.attempts[min(round_, len(exercise.attempts)) - 1]
        return f"```python\n{code}\n```\nThis prints the result on one line."
    stdout = re.search(r"Stdout:\n```\n(.*?)\n```", request.last_text, re.DOTALL)
    printed = stdout.group(1).strip() if stdout else ""
    error = re.search(r"^(\w+(?:Error|Exception): .*)$", request.last_text, re.MULTILINE)
    if exercise is not None and printed == exercise.expected and error is None:
        return json.dumps({"approved": True, "reasons": []})
    if error is not None:
        reasons = [f"the program crashed: {error.group(1)}"]
    elif exercise is None:
        reasons = ["the program does not attempt the task"]
    else:
        reasons = [f"the output is {printed!r}, but the task asks for {exercise.expected!r}"]
    return json.dumps({"approved": False, "reasons": reasons})


def reflection_team() -> ScriptedChatCompletionClient:
    """The stand-in for the reflection demo and notebook."""
    return ScriptedChatCompletionClient(_respond)
