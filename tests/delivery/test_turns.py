"""The turn watch beyond the conformance suite: one log line per kind of failure per turn, and
handlers that fight the cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from aun_runtime import (
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    Budgets,
    MessageContext,
    RecordKind,
    ThreadBudgetExceeded,
    UnknownAIDError,
    event,
)


class Spammer(AUNAgent):
    """One turn that sends ``n`` messages to an AID nobody has, and ``n`` replies past its budget."""

    def __init__(self, n: int) -> None:
        super().__init__("spams")
        self.n = n

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        for k in range(self.n):
            with contextlib.suppress(UnknownAIDError, ThreadBudgetExceeded):  # refused: a dead letter each
                await self.send("nobody.local", f"spam {k}")
            with contextlib.suppress(ThreadBudgetExceeded):  # past the thread budget: a budget stop each
                await self.reply(f"reply {k}")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "aun_runtime" and r.levelno == logging.WARNING]


async def test_repeated_failures_of_one_turn_are_logged_once_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    async with AUNRuntime(budgets=Budgets(thread_messages=10)) as runtime:
        await runtime.register_agent("spam.local", lambda: Spammer(200))
        inbox = await runtime.open_inbox()
        with caplog.at_level(logging.WARNING, logger="aun_runtime"):
            await inbox.send("spam.local", "go")
            await runtime.settle()
    # Everything is in the archive (the refused sends fill the thread too, until its budget stops them)...
    dead_letters = runtime.archive.count(owner="spam.local", kind=RecordKind.DEAD_LETTER)
    budget_stops = runtime.archive.count(owner="spam.local", kind=RecordKind.BUDGET_STOP)
    assert dead_letters > 1 and budget_stops > 100
    # ...and the log has the first of each kind at once, and one line with the count at the end.
    lines = _warnings(caplog)
    assert len(lines) == 4, lines
    first_dead, first_stop, *summaries = lines
    assert first_dead.startswith("dead letter for spam.local: UnknownAIDError")
    assert first_stop.startswith("budget stop for spam.local: send refused")
    assert sorted(summaries) == sorted([
        f"the handler of spam.local: {budget_stops} budget stops in this turn, logged once (each is in the archive); "
        f"the first: {first_stop}",
        f"the handler of spam.local: {dead_letters} dead letters in this turn, logged once (each is in the archive); "
        f"the first: {first_dead}",
    ])


async def test_failures_outside_any_turn_are_logged_one_by_one(caplog: pytest.LogCaptureFixture) -> None:
    async with AUNRuntime() as runtime:
        await runtime.open_inbox()
        with caplog.at_level(logging.WARNING, logger="aun_runtime"):
            for _ in range(3):
                with pytest.raises(UnknownAIDError, match=r"nobody\.local"):
                    await runtime.send("nobody.local", "anyone?")
    assert len([line for line in _warnings(caplog) if line.startswith("dead letter for app.local")]) == 3


class Stubborn(AUNAgent):
    """Catches the cancellation of its first turn and goes on for a little while."""

    def __init__(self) -> None:
        super().__init__("ignores one cancellation")
        self.turns = 0

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.turns += 1
        if self.turns == 1:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await asyncio.sleep(0.05)  # carries on past the timeout, then returns
        await self.reply(f"turn {self.turns}")


async def test_a_handler_that_swallows_the_cancellation_is_told_of_and_its_agent_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with AUNRuntime(handler_timeout=0.1) as runtime:
        await runtime.register_agent("stubborn.local", Stubborn)
        inbox = await runtime.open_inbox()
        with caplog.at_level(logging.WARNING, logger="aun_runtime"):
            await inbox.send("stubborn.local", "one")
            await inbox.send("stubborn.local", "two")
            await runtime.settle()
        # The drain was not left marked as cancelled: the second message was handled normally.
        assert [m.text for m in inbox.received] == ["turn 1", "turn 2"]
    assert "the handler of stubborn.local caught the cancellation at its handler_timeout and went on" in _warnings(caplog)
    assert runtime.stats.dead_letters == 0


async def test_a_reused_turn_starts_with_nothing_of_the_last_one_counted() -> None:
    # The watch hands an ended turn's object to the next turn: what the last one counted (its
    # sends, which derive a retried turn's message ids, its try, what it waited for) must not carry over.
    from aun_runtime.delivery._turns import TurnWatch

    watch = TurnWatch()
    first = watch.begin("a.local", None, None)
    first.sends, first.attempt = 2, 3
    first.wait_for("model")
    watch.end(first)
    second = watch.begin("b.local", None, None)
    assert second is first  # reused
    assert (second.sends, second.attempt, second.waiting) == (0, 1, None)
    watch.end(second)


async def test_turns_that_end_plainly_reuse_one_object_and_a_cut_off_turn_is_not_reused() -> None:
    from aun_runtime.delivery._turns import TurnWatch

    watch = TurnWatch()
    first = watch.begin("a.local", None, 10.0)
    watch.end(first)
    second = watch.begin("b.local", None, None)
    assert second is first  # one object for a drain's turns, not one per message
    assert (second.aid, second.timeout, second.outer, second.cause) == ("b.local", None, None, None)
    watch.cut_all(lambda turn: RuntimeError("stopping"))
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(0)  # the cut-off's cancellation reaches this task
    assert watch.cut_off(second) is not None
    watch.end(second)
    assert watch.begin("c.local", None, None) is not second  # its cause may still be read: a new one
