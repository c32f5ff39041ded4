"""`Budgets.group_chat`: members of a broadcast group talk for the turns it grants, then stop."""

from __future__ import annotations

from collections import Counter

import pytest

from aun_runtime import DEFAULT_BUDGETS, AUNAgent, AUNMessage, AUNRuntime, Budgets, MessageContext, event


class Chatty(AUNAgent):
    """Answers whatever it is shown."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(f"{self.aid} answers {message.from_aid}")


async def _chat(budgets: Budgets, members: int) -> tuple[Counter[str], int]:
    async with AUNRuntime(budgets=budgets) as runtime:
        names = [f"m{i}.local" for i in range(members)]
        for name in names:
            await runtime.register_agent(name, Chatty)
        await runtime.create_group("room", [*names, "app.local"])
        await runtime.group_send("room", "over to you")
        await runtime.settle()
        inbox = await runtime.open_inbox()
        return Counter(m.from_aid for m in inbox.received), runtime.stats.budget_stops


@pytest.mark.parametrize("turns", [2, 4])
async def test_each_member_speaks_its_turns_and_the_chat_ends(turns: int) -> None:
    spoke, stops = await _chat(Budgets.group_chat(turns=turns, members=3), members=3)
    assert spoke == {f"m{i}.local": turns for i in range(3)}
    assert stops > 0  # each member's reply past its turns was refused, and recorded


async def test_by_default_an_unaddressed_member_speaks_once() -> None:
    spoke, _ = await _chat(DEFAULT_BUDGETS, members=3)
    assert spoke == {f"m{i}.local": 1 for i in range(3)}


def test_the_preset_sizes_the_thread_and_model_budgets_for_its_turns() -> None:
    budgets = Budgets.group_chat(turns=5, members=20)
    assert budgets.unaddressed_replies == 5
    assert budgets.thread_messages == budgets.model_calls_per_thread == 101
    assert budgets.model_tokens_per_thread == 101 * 12_500
    assert Budgets.group_chat(turns=1, members=2).but(unaddressed_replies=1) == DEFAULT_BUDGETS
    with pytest.raises(ValueError, match="at least one turn"):
        Budgets.group_chat(turns=0)
