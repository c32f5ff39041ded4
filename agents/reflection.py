"""The reflection team: a Coder writes code, an Executor really runs it, a Reviewer judges the run.

The agents speak the contract in `protocols.reflection`. Each is an AUN agent with `@event`
handlers only, addressing the next by AID, and keeps no state between messages: every message carries
the task, so the team can be spread over processes. The outcome goes back to whoever sent the task.

* `Coder` asks the model for a program (and, after a rejection, for a corrected one, showing
  it its last attempt, what running it printed, and the Reviewer's reasons).
* `Executor` runs the program in a fresh temporary directory with a timeout
  (autogen-ext's `LocalCommandLineCodeExecutor`) and reports exit code, stdout and stderr.
* `Reviewer` asks the model for a structured verdict (JSON: `approved`, `reasons`). Code
  that failed to run is never approved, whatever the model says. Approved: the result goes to the
  requester. Rejected: the Coder gets the reasons, unless the round limit is reached, in which case
  the requester gets the last attempt with `status="round_limit"`.

Example:
    ```python
    async with AUNRuntime() as runtime:
        await register_reflection_team(runtime, model_client_from_env("cassettes/reflection.json"))
        inbox = await runtime.open_inbox()
        await inbox.send("coder.local", CodingTaskMsg(task="Print the first 10 primes."))
    ```
"""

from __future__ import annotations

from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from aun_runtime import AUNRuntime, MessageContext, event
from protocols.errors import InvalidMessageError
from protocols.reflection import (
    DEFAULT_MAX_ROUNDS,
    MAX_ROUNDS_LIMIT,
    CodeGenMsg,
    CodingResultMsg,
    CodingTaskMsg,
    ExecutionResultMsg,
    ReviewMsg,
    ReviewVerdict,
    TaskRef,
    extract_code,
    parse_verdict,
)

from ._answering import AnsweringAgent, ModelAnsweringAgent
from ._code_runner import DEFAULT_TIMEOUT, run_program
from ._model_calls import ModelLike, result_text, use_model

__all__ = [
    "CODER_PROMPT",
    "REVIEWER_PROMPT",
    "Coder",
    "Executor",
    "Reviewer",
    "register_reflection_team",
]

CODER_PROMPT = """\
You are a programmer. Write a complete program that does what the task asks.
Answer with the whole program in one fenced code block, followed by at most two sentences on what it does.
The program runs on its own, reads no input, and prints its results to standard output.
When your program comes back rejected, fix every problem the review names and answer with the whole
corrected program."""

REVIEWER_PROMPT = """\
You review a program against its task, using what running it printed.
Approve it only if it ran without error and its output does exactly what the task asks.
Otherwise reject it, and give each problem as a short, specific reason the programmer can act on.
Answer with a JSON object and nothing else: {"approved": true or false, "reasons": ["...", "..."]}"""


def _fenced(text: str, language: str = "") -> str:
    return f"```{language}\n{text.rstrip()}\n```" if text.strip() else "(empty)"


class Coder(ModelAnsweringAgent):
    """Writes a program for each task and a corrected one for each rejection.

    Args:
        model: the model client, or a config to build one from.
        executor: the Executor's AID.
        system_prompt: the Coder's instructions.
    """

    def __init__(
        self, model: ModelLike, *, executor: str = "executor.local", system_prompt: str = CODER_PROMPT
    ) -> None:
        super().__init__("writes code for tasks and fixes it after review")
        self.model = use_model(model)
        self.executor = executor
        self.system_prompt = system_prompt

    @event
    async def on_task(self, message: CodingTaskMsg, ctx: MessageContext) -> None:
        inbound = self.inbound
        assert inbound is not None
        task = TaskRef.of(message, requester=inbound.from_aid)
        await self._write(task, 1, [self._task_message(task)])

    @event
    async def on_review(self, message: ReviewMsg, ctx: MessageContext) -> None:
        task = message.task
        feedback = "\n".join(
            [
                f"Your program (round {message.round}) was rejected.",
                f"Exit code: {message.exit_code}",
                f"Stdout:\n{_fenced(message.stdout)}",
                f"Stderr:\n{_fenced(message.stderr)}",
                "Reasons:",
                *(f"- {reason}" for reason in message.reasons),
                "Answer with the whole corrected program.",
            ]
        )
        conversation: list[LLMMessage] = [
            self._task_message(task),
            AssistantMessage(content=_fenced(message.code, task.language), source="coder"),
            UserMessage(content=feedback, source="reviewer"),
        ]
        await self._write(task, message.round + 1, conversation)

    def _task_message(self, task: TaskRef) -> UserMessage:
        return UserMessage(content=f"Task ({task.language}):\n{task.task}", source="user")

    async def _write(self, task: TaskRef, round_: int, conversation: list[LLMMessage]) -> None:
        result = await self.model.create([SystemMessage(content=self.system_prompt), *conversation])
        answer = result_text(result)
        code = extract_code(answer, task.language)
        notes = answer.split("```")[-1].strip() if answer.count("```") >= 2 else ""
        await self.send(self.executor, CodeGenMsg(task=task, round=round_, code=code, notes=notes))


class Executor(AnsweringAgent):
    """Runs each round's code for real and reports what happened to the Reviewer.

    Args:
        reviewer: the Reviewer's AID.
        timeout: seconds a program may run before it is stopped.
    """

    def __init__(self, *, reviewer: str = "reviewer.local", timeout: int = DEFAULT_TIMEOUT) -> None:
        super().__init__("runs code in a temporary directory with a timeout")
        if timeout < 1:
            raise ValueError("timeout must be at least 1 second")
        self.reviewer = reviewer
        self.timeout = timeout

    @event
    async def on_code(self, message: CodeGenMsg, ctx: MessageContext) -> None:
        outcome = await run_program(message.code, message.task.language, timeout=self.timeout)
        await self.send(
            self.reviewer,
            ExecutionResultMsg(
                task=message.task,
                round=message.round,
                code=message.code,
                exit_code=outcome.exit_code,
                stdout=outcome.stdout,
                stderr=outcome.stderr,
                timed_out=outcome.timed_out,
            ),
        )


class Reviewer(ModelAnsweringAgent):
    """Judges each run; sends the outcome to the requester or the reasons back to the Coder.

    Args:
        model: the model client, or a config to build one from.
        coder: the Coder's AID.
        max_rounds: rounds a task gets unless it asks for fewer or more (at most
            `MAX_ROUNDS_LIMIT`).
        require_clean_exit: never approve a run that failed or timed out, whatever the model says.
        system_prompt: the Reviewer's instructions.
    """

    def __init__(
        self,
        model: ModelLike,
        *,
        coder: str = "coder.local",
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        require_clean_exit: bool = True,
        system_prompt: str = REVIEWER_PROMPT,
    ) -> None:
        super().__init__("reviews each run and approves or sends it back")
        if not 1 <= max_rounds <= MAX_ROUNDS_LIMIT:
            raise ValueError(f"max_rounds must be between 1 and {MAX_ROUNDS_LIMIT}")
        self.model = use_model(model)
        self.coder = coder
        self.max_rounds = max_rounds
        self.require_clean_exit = require_clean_exit
        self.system_prompt = system_prompt

    @event
    async def on_result(self, message: ExecutionResultMsg, ctx: MessageContext) -> None:
        verdict = await self._verdict(message)
        task = message.task
        if verdict.approved:
            await self.send(task.requester, self._outcome(message, "approved", []))
            return
        reasons = verdict.reasons or ["the review gave no reason"]
        limit = task.max_rounds or self.max_rounds
        if message.round >= limit:
            self.think(f"{task.task_id}: round {message.round} rejected and the limit is {limit}: giving up")
            await self.send(task.requester, self._outcome(message, "round_limit", reasons))
            return
        await self.send(
            self.coder,
            ReviewMsg(
                task=task,
                round=message.round,
                code=message.code,
                reasons=reasons,
                exit_code=message.exit_code,
                stdout=message.stdout,
                stderr=message.stderr,
            ),
        )

    async def _verdict(self, run: ExecutionResultMsg) -> ReviewVerdict:
        status = f"{run.exit_code}" + (" (stopped: time limit)" if run.timed_out else "")
        prompt = "\n".join(
            [
                f"Task ({run.task.language}):\n{run.task.task}",
                f"\nProgram (round {run.round}):\n{_fenced(run.code, run.task.language)}",
                f"\nExit code: {status}",
                f"Stdout:\n{_fenced(run.stdout)}",
                f"Stderr:\n{_fenced(run.stderr)}",
            ]
        )
        json_mode = True if self.model.model_info.get("json_output") else None
        result = await self.model.create(
            [SystemMessage(content=self.system_prompt), UserMessage(content=prompt, source="executor")],
            json_output=json_mode,
        )
        try:
            verdict = parse_verdict(result_text(result))
        except InvalidMessageError as exc:
            self.think(f"unreadable review of {run.task.task_id} round {run.round}: {exc}")
            verdict = ReviewVerdict(approved=False, reasons=[f"the review could not be read: {exc}"])
        if verdict.approved and self.require_clean_exit and not run.succeeded:
            why = "it timed out" if run.timed_out else f"it exited with status {run.exit_code}"
            self.think(f"the model approved round {run.round} of {run.task.task_id}, but {why}: rejected")
            verdict = ReviewVerdict(approved=False, reasons=[*verdict.reasons, f"the program failed: {why}"])
        return verdict

    @staticmethod
    def _outcome(run: ExecutionResultMsg, status: str, reasons: list[str]) -> CodingResultMsg:
        return CodingResultMsg(
            task_id=run.task.task_id,
            task=run.task.task,
            status=status,  # type: ignore[arg-type]
            rounds=run.round,
            code=run.code,
            exit_code=run.exit_code,
            stdout=run.stdout,
            stderr=run.stderr,
            reasons=reasons,
        )


async def register_reflection_team(
    runtime: AUNRuntime,
    model: ModelLike,
    *,
    coder: str = "coder.local",
    executor: str = "executor.local",
    reviewer: str = "reviewer.local",
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    timeout: int = DEFAULT_TIMEOUT,
) -> None:
    """Register a Coder, an Executor and a Reviewer under the given AIDs, wired to each other.

    `model` may be a config: then each model-using agent builds its own client from it.
    """
    await runtime.register_agent(coder, lambda: Coder(model, executor=executor))
    await runtime.register_agent(executor, lambda: Executor(reviewer=reviewer, timeout=timeout))
    await runtime.register_agent(reviewer, lambda: Reviewer(model, coder=coder, max_rounds=max_rounds))
