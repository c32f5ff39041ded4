"""Multi-agent debate: solvers exchange answers with their neighbours for N rounds; a moderator takes
the majority of their final answers.

No solver waits on a call: a `Solver` starts its next round when the last of its neighbours'
answers for the current round arrives as a message (answers that arrive early are kept), and sends its
final answer to the moderator after the last round. `DebateModerator` opens the debate for
every solver and, once all finals are in, sends the `DebateResult`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from autogen_core.models import SystemMessage, UserMessage

from aun_runtime import MessageContext, event
from protocols.debate import (
    DebateAnswer,
    DebateOpen,
    DebateQuestion,
    DebateResult,
    SolverFinal,
    extract_answer,
    majority,
)

from ._answering import AnsweringAgent, ModelAnsweringAgent
from ._gather import MAX_OPEN_GATHERS, GatherTable
from ._model_calls import ModelLike, result_text, use_model

__all__ = ["SOLVER_PROMPT", "DebateModerator", "Solver"]

SOLVER_PROMPT = """\
You solve problems step by step, showing your reasoning briefly.
End your answer with a last line of the form: ANSWER: <the answer, nothing else>"""


@dataclass
class _Debate:
    opened: DebateOpen
    done: int = 0  # rounds this solver has answered
    heard: dict[int, dict[str, DebateAnswer]] = field(default_factory=dict)
    mine: dict[int, DebateAnswer] = field(default_factory=dict)


class Solver(ModelAnsweringAgent):
    """One debater.

    Args:
        model: the model client, or a config to build one from.
        neighbours: the AIDs whose answers this solver reads, and who read its own.
        style: a line added to the solver's instructions, so that solvers think differently.
    """

    def __init__(self, model: ModelLike, *, neighbours: list[str], style: str = "") -> None:
        super().__init__("debates a question with its neighbours")
        self.model = use_model(model)
        self.system_prompt = SOLVER_PROMPT + (f"\n{style.strip()}" if style.strip() else "")
        self.neighbours = list(neighbours)
        # Debates in progress, oldest first, bounded like any gather (see agents._gather).
        self.debates: OrderedDict[str, _Debate] = OrderedDict()
        self.early: dict[str, list[DebateAnswer]] = {}

    @event
    async def on_open(self, message: DebateOpen, ctx: MessageContext) -> None:
        debate = self.debates.get(message.question_id)
        if debate is None:  # else a second try of this turn: the debate goes on where the first left it
            if len(self.debates) >= MAX_OPEN_GATHERS:
                self.debates.popitem(last=False)
            debate = self.debates[message.question_id] = _Debate(message)
        for answer in self.early.pop(message.question_id, []):
            debate.heard.setdefault(answer.round, {})[answer.solver] = answer
        await self._advance(debate)

    @event
    async def on_answer(self, message: DebateAnswer, ctx: MessageContext) -> None:
        debate = self.debates.get(message.question_id)
        if debate is None:  # a neighbour was faster than our invitation: keep it for later
            self.early.setdefault(message.question_id, []).append(message)
            return
        debate.heard.setdefault(message.round, {})[message.solver] = message
        await self._advance(debate)

    async def _advance(self, debate: _Debate) -> None:
        rounds = debate.opened.rounds
        while debate.done < rounds and (
            debate.done == 0 or set(self.neighbours) <= set(debate.heard.get(debate.done, {}))
        ):
            round_ = debate.done + 1
            answer = await self._answer(debate, round_)
            debate.mine[round_] = answer
            debate.done = round_
            if round_ == rounds:
                final = SolverFinal(
                    question_id=answer.question_id,
                    solver=self.aid,
                    answer=answer.answer,
                    reasoning=answer.reasoning,
                )
                await self.send(debate.opened.moderator, final)
                del self.debates[answer.question_id]
                return
            for neighbour in self.neighbours:
                await self.send(neighbour, answer)

    async def _answer(self, debate: _Debate, round_: int) -> DebateAnswer:
        question = debate.opened.question
        if round_ == 1:
            prompt = question
        else:
            heard = debate.heard[round_ - 1]
            others = "\n\n".join(
                f"One agent's solution:\n{heard[n].reasoning}" for n in self.neighbours if n in heard
            )
            prompt = (
                f"{question}\n\nYour previous answer:\n{debate.mine[round_ - 1].reasoning}\n\n"
                f"Other agents' answers:\n{others}\n\n"
                "Using their reasoning as extra advice, give your updated answer."
            )
        result = await self.model.create(
            [SystemMessage(content=self.system_prompt), UserMessage(content=prompt, source="user")]
        )
        text = result_text(result).strip()
        return DebateAnswer(
            question_id=debate.opened.question_id,
            solver=self.aid,
            round=round_,
            reasoning=text,
            answer=extract_answer(text),
        )


class DebateModerator(AnsweringAgent):
    """Opens debates and counts the final votes.

    Args:
        solvers: the solvers' AIDs.
        rounds: rounds each debate lasts.
    """

    def __init__(self, *, solvers: list[str], rounds: int = 3) -> None:
        super().__init__("puts questions to the solvers and takes the majority")
        if not solvers:
            raise ValueError("a debate needs solvers")
        self.solvers = list(solvers)
        self.rounds = rounds
        self.table: GatherTable[SolverFinal] = GatherTable()

    @event
    async def on_question(self, message: DebateQuestion, ctx: MessageContext) -> None:
        inbound = self.inbound
        assert inbound is not None
        self.table.open(message.question_id, inbound.from_aid, self.solvers)
        opening = DebateOpen(
            question_id=message.question_id, question=message.question, rounds=self.rounds, moderator=self.aid
        )
        for solver in self.solvers:
            await self.send(solver, opening)

    @event
    async def on_final(self, message: SolverFinal, ctx: MessageContext) -> None:
        gather = self.table.add(message.question_id, message.solver, message)
        if gather is None:
            return
        votes = {final.solver: final.answer for final in gather.in_order()}
        result = DebateResult(
            question_id=message.question_id, answer=majority(votes), votes=votes, rounds=self.rounds
        )
        await self.send(gather.requester, result)
