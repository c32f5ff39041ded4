"""The transcript shows a budget stop as a loop stop is shown, under the message it concerns, and a
run's summary counts budget stops beside loop stops."""

from __future__ import annotations

import pytest

from aun_runtime import AUNRuntime, Budgets, RecordKind
from aun_runtime.cli import run_app
from aun_runtime.testing import Bouncer, Pondering


def _lines_under(transcript: str, heading: str) -> list[str]:
    """The lines of ``transcript`` from the one containing ``heading`` up to the next message."""
    lines = transcript.splitlines()
    start = next(n for n, line in enumerate(lines) if heading in line)
    under = []
    for line in lines[start + 1 :]:
        if line.lstrip().startswith("#"):
            break
        under.append(line.strip())
    return under


async def test_a_refused_send_is_shown_under_the_message_it_would_have_answered() -> None:
    runtime = AUNRuntime(budgets=Budgets(thread_messages=3))
    await runtime.register_agent("ping.local", Bouncer)
    await runtime.register_agent("pong.local", Bouncer)
    await runtime.start()
    try:
        await runtime.send("pong.local", "ping", sender="ping.local")
        await runtime.settle()
        transcript = runtime.transcript()
        stops = runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])
    finally:
        await runtime.close()

    # ping -> pong, pong -> ping, ping -> pong: the thread is full, pong's second answer is refused.
    [stop] = stops
    assert stop.owner == "pong.local" and "thread_messages=3" in (stop.reason or "")
    line = f"!! BUDGET STOP for pong.local: {stop.reason}"
    assert transcript.count("!! BUDGET STOP") == 1
    assert line in _lines_under(transcript, "#3 ping.local -> pong.local")
    assert line not in _lines_under(transcript, "#2 pong.local -> ping.local")
    assert "LOOP GUARD" not in transcript and "DEAD LETTER" not in transcript


async def test_a_refused_model_call_is_shown_under_the_message_being_handled() -> None:
    runtime = AUNRuntime()
    await runtime.register_agent("ponder.local", Pondering, budgets=Budgets(model_calls_per_thread=1))
    inbox = await runtime.open_inbox("app.local")
    await runtime.start()
    try:
        await inbox.send("ponder.local", "what do you think?")
        await runtime.settle()
        transcript = runtime.transcript()
        stops = runtime.archive.records(kinds=[RecordKind.BUDGET_STOP])
    finally:
        await runtime.close()

    # The first call is allowed, the second refused: the handler ends there, without an answer.
    [stop] = stops
    assert stop.owner == "ponder.local" and "model_calls_per_thread=1" in (stop.reason or "")
    assert stop.message is not None and stop.message.from_aid == "app.local"
    assert inbox.received == []
    under = _lines_under(transcript, "#1 app.local -> ponder.local")
    assert under == [
        "delivered to ponder.local · no reply",
        f"!! BUDGET STOP for ponder.local: {stop.reason}",
    ]
    assert "DEAD LETTER" not in transcript


async def test_a_runs_summary_counts_budget_stops_beside_loop_stops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def app(runtime: AUNRuntime) -> None:
        await runtime.register_agent("a.local", Bouncer)
        await runtime.register_agent("b.local", Bouncer)
        await runtime.open_inbox("app.local")
        await runtime.create_group("room", ["a.local", "b.local", "app.local"])
        await runtime.group_send("room", "anyone?", sender="app.local")

    # Nobody was addressed: each answers the question once, and its answer to the other's answer
    # is refused (one unaddressed reply per thread, by default).
    runtime = await run_app(app, archive=":memory:")
    out = capsys.readouterr().out
    assert runtime.stats.budget_stops == 2
    assert "0 dead letters · 0 loop stops · 2 budget stops" in out
    assert out.count("!! BUDGET STOP for ") == 2
