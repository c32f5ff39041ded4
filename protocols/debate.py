"""The multi-agent debate contract: solvers answer, read their neighbours' answers, answer again for
a set number of rounds, and a moderator takes the majority of their final answers.

| message | from -> to | meaning |
|---|---|---|
| DebateQuestion | app -> moderator | solve this |
| DebateOpen | moderator -> each solver | debate it for `rounds` rounds; finals to me |
| DebateAnswer | solver -> its neighbours | my answer in round `round` |
| SolverFinal | solver -> moderator | my answer after the last round |
| DebateResult | moderator -> requester | the majority answer and every solver's vote |

A solver's round `r + 1` starts once all its neighbours' round `r` answers are in. Answers end
with a line `ANSWER: <value>` (`extract_answer`), which is what the vote counts.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter

from pydantic import Field

from ._identifiers import AID
from ._text import snip
from .contract import AUNContract

__all__ = [
    "MAX_DEBATE_ROUNDS",
    "DebateAnswer",
    "DebateOpen",
    "DebateQuestion",
    "DebateResult",
    "SolverFinal",
    "extract_answer",
    "majority",
]

#: Rounds a debate may have: each round is a hop of the loop guard for every solver.
MAX_DEBATE_ROUNDS = 10


class DebateQuestion(AUNContract, wire_name="aun.debate.DebateQuestion"):
    """A question for the moderator to put to the solvers."""

    question: str = Field(min_length=1)
    question_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12], min_length=1, max_length=128)

    def summary(self) -> str:
        return f"question {self.question_id}: {snip(self.question, 50)}"


class DebateOpen(AUNContract, wire_name="aun.debate.DebateOpen"):
    """The moderator opens the debate for one solver."""

    question_id: str
    question: str
    rounds: int = Field(ge=1, le=MAX_DEBATE_ROUNDS)
    moderator: AID

    def summary(self) -> str:
        return f"debate {self.question_id}: {self.rounds} rounds"


class DebateAnswer(AUNContract, wire_name="aun.debate.DebateAnswer"):
    """A solver's answer in one round, sent to its neighbours."""

    question_id: str
    solver: AID
    round: int = Field(ge=1, le=MAX_DEBATE_ROUNDS)
    reasoning: str
    answer: str

    def summary(self) -> str:
        return f"{self.solver} round {self.round}: {self.answer}"


class SolverFinal(AUNContract, wire_name="aun.debate.SolverFinal"):
    """A solver's answer after the last round."""

    question_id: str
    solver: AID
    answer: str
    reasoning: str = ""

    def summary(self) -> str:
        return f"{self.solver} final: {self.answer}"


class DebateResult(AUNContract, wire_name="aun.debate.DebateResult"):
    """The majority answer, with each solver's final answer."""

    question_id: str
    answer: str
    votes: dict[str, str]
    rounds: int

    def summary(self) -> str:
        agree = sum(1 for vote in self.votes.values() if vote == self.answer)
        return f"answer to {self.question_id}: {self.answer} ({agree} of {len(self.votes)} solvers)"


_ANSWER = re.compile(r"ANSWER\s*:\s*\**\s*(.+?)\s*\**\s*$", re.IGNORECASE | re.MULTILINE)


def extract_answer(text: str) -> str:
    """The value of the last `ANSWER: ...` line, or the last non-empty line if there is none.

    Example:
        >>> extract_answer("12 + 6 = 18\\nANSWER: 18")
        '18'
    """
    found = _ANSWER.findall(text)
    if found:
        return str(found[-1]).strip().rstrip(".")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def majority(votes: dict[str, str]) -> str:
    """The most common answer; a tie goes to the answer that sorts first (the same every run)."""
    counts = Counter(votes.values())
    best = max(counts.values())
    return min(answer for answer, count in counts.items() if count == best)
