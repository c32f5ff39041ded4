"""The reflection contract: a Coder writes code, an Executor runs it, a Reviewer judges the run.

Five messages make the contract, each named on the wire under `aun.reflection`:

| message | from -> to | meaning |
|---|---|---|
| CodingTaskMsg | application -> Coder | here is a task; the result goes back to the sender |
| CodeGenMsg | Coder -> Executor | here is code for round N; run it |
| ExecutionResultMsg | Executor -> Reviewer | this is what running it did (exit code, stdout, stderr) |
| ReviewMsg | Reviewer -> Coder | rejected, with reasons: write round N+1 |
| CodingResultMsg | Reviewer -> application | approved, or the round limit was reached: the outcome |

Every message after the task carries the task itself (`TaskRef`: the text, who asked, the
round limit), so no agent keeps state between messages: any of them can restart, or run in another
process, without losing a task. A round costs three hops of the runtime's loop guard, which is why
the round limit is capped (`MAX_ROUNDS_LIMIT`).

Pure data and pure helpers (code extraction, verdict parsing, output clipping); no I/O.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._identifiers import AID
from ._text import snip
from .contract import AUNContract
from .errors import InvalidMessageError

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "LANGUAGES",
    "MAX_OUTPUT_CHARS",
    "MAX_ROUNDS_LIMIT",
    "CodeGenMsg",
    "CodingResultMsg",
    "CodingTaskMsg",
    "ExecutionResultMsg",
    "ReviewMsg",
    "ReviewVerdict",
    "TaskRef",
    "clip_output",
    "extract_code",
    "parse_verdict",
]

#: Rounds a task gets when neither the task nor the Reviewer says otherwise.
DEFAULT_MAX_ROUNDS = 3
#: The most rounds a task may ask for: three hops a round (code, run, review) plus the task and the
#: result stay within the runtime's default hop limit of 32.
MAX_ROUNDS_LIMIT = 10
#: stdout and stderr are each clipped to this many characters (head and tail kept): the Reviewer's
#: prompt and the message must stay small whatever a program prints.
MAX_OUTPUT_CHARS = 4_000
#: Languages the Executor runs.
LANGUAGES = ("python", "sh", "bash")

Language = Literal["python", "sh", "bash"]


def _new_task_id() -> str:
    return uuid.uuid4().hex[:12]


class CodingTaskMsg(AUNContract, wire_name="aun.reflection.CodingTask"):
    """A coding task for the Coder. The outcome goes back to whoever sent it.

    Attributes:
        task: what the program must do, in words.
        task_id: the task's id (default: a fresh one); every later message carries it.
        language: the program's language.
        max_rounds: rounds allowed before giving up (default: the Reviewer's setting).
    """

    task: str = Field(min_length=1, max_length=20_000)
    task_id: str = Field(default_factory=_new_task_id, min_length=1, max_length=128)
    language: Language = "python"
    max_rounds: int | None = Field(default=None, ge=1, le=MAX_ROUNDS_LIMIT)

    def summary(self) -> str:
        return f"coding task {self.task_id}: {snip(self.task, 60)}"


class TaskRef(BaseModel):
    """The task as it travels with each message: its text, who asked, and its round limit."""

    model_config = ConfigDict(frozen=True)

    task_id: str = Field(min_length=1, max_length=128)
    task: str = Field(min_length=1)
    language: Language = "python"
    requester: AID
    max_rounds: int | None = Field(default=None, ge=1, le=MAX_ROUNDS_LIMIT)

    @classmethod
    def of(cls, task: CodingTaskMsg, requester: str) -> TaskRef:
        return cls(
            task_id=task.task_id,
            task=task.task,
            language=task.language,
            requester=requester,
            max_rounds=task.max_rounds,
        )


class CodeGenMsg(AUNContract, wire_name="aun.reflection.CodeGen"):
    """Code written for one round of a task, for the Executor to run."""

    task: TaskRef
    round: int = Field(ge=1, le=MAX_ROUNDS_LIMIT)
    code: str
    notes: str = ""

    def summary(self) -> str:
        lines = len(self.code.splitlines())
        return f"round {self.round} of {self.task.task_id}: {lines} line{'s' if lines != 1 else ''} of {self.task.language}"


class ExecutionResultMsg(AUNContract, wire_name="aun.reflection.ExecutionResult"):
    """What running a round's code did."""

    task: TaskRef
    round: int = Field(ge=1, le=MAX_ROUNDS_LIMIT)
    code: str
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def summary(self) -> str:
        if self.timed_out:
            outcome = "timed out"
        elif self.exit_code == 0:
            outcome = f"exit 0, stdout {snip(self.stdout, 40)!r}"
        else:
            last = self.stderr.strip().splitlines()[-1] if self.stderr.strip() else ""
            outcome = f"exit {self.exit_code}: {snip(last, 50)}"
        return f"round {self.round} of {self.task.task_id} ran: {outcome}"


class ReviewMsg(AUNContract, wire_name="aun.reflection.Review"):
    """A rejected round, with the reasons and what the run showed, for the Coder's next round."""

    task: TaskRef
    round: int = Field(ge=1, le=MAX_ROUNDS_LIMIT)
    code: str
    reasons: list[str] = Field(min_length=1)
    exit_code: int
    stdout: str = ""
    stderr: str = ""

    def summary(self) -> str:
        return f"round {self.round} of {self.task.task_id} rejected: {snip('; '.join(self.reasons), 60)}"


class CodingResultMsg(AUNContract, wire_name="aun.reflection.CodingResult"):
    """The outcome of a task: approved code, or the last attempt when the round limit was reached."""

    task_id: str
    task: str
    status: Literal["approved", "round_limit"]
    rounds: int = Field(ge=1)
    code: str
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    reasons: list[str] = Field(default_factory=list)

    @property
    def approved(self) -> bool:
        return self.status == "approved"

    def summary(self) -> str:
        if self.approved:
            return f"task {self.task_id} approved after {self.rounds} round(s)"
        return f"task {self.task_id} not approved: round limit of {self.rounds} reached ({snip('; '.join(self.reasons), 50)})"


class ReviewVerdict(BaseModel):
    """The Reviewer model's structured answer."""

    model_config = ConfigDict(extra="ignore")

    approved: bool
    reasons: list[str] = Field(default_factory=list)


_FENCED = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_code(text: str, language: str = "python") -> str:
    """The code in a model's answer: the first fenced block in `language` (or untagged), else the
    first fenced block, else the whole answer.

    Example:
        >>> extract_code("Here:\\n```python\\nprint(1)\\n```\\nDone.")
        'print(1)\\n'
    """
    blocks = _FENCED.findall(text)
    for tag, body in blocks:
        if tag.lower() in (language, "py" if language == "python" else language, ""):
            return str(body)
    if blocks:
        return str(blocks[0][1])
    return text.strip() + "\n"


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdict(text: str) -> ReviewVerdict:
    """Read a verdict from a model's answer: plain JSON, JSON in a code fence, or JSON amid prose.

    Raises:
        InvalidMessageError: no JSON object with an `approved` field could be read.

    Example:
        >>> parse_verdict('```json\\n{"approved": false, "reasons": ["prints 9 numbers"]}\\n```').reasons
        ['prints 9 numbers']
    """
    candidates = [text.strip()]
    candidates += [body for _, body in _FENCED.findall(text)]
    found = _JSON_OBJECT.search(text)
    if found is not None:
        candidates.append(found.group(0))
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and "approved" in data:
            try:
                return ReviewVerdict.model_validate(data)
            except ValidationError as exc:
                raise InvalidMessageError(f"the verdict does not fit: {exc.errors()[0]['msg']}") from None
    raise InvalidMessageError(
        f'no verdict in the review: expected JSON like {{"approved": false, "reasons": [...]}}, '
        f"got {snip(text, 120)!r}"
    )


def clip_output(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """`text` cut to `limit` characters, keeping its head and its tail (where errors are)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n… [{cut} characters cut] …\n{text[-half:]}"
