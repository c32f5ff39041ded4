"""The console page in a real browser (Debian's Chromium, driven by Playwright) while agents talk.

The page is opened before anything happens and is never reloaded: everything it shows arrives on
its live stream while the scenario plays.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Locator, Page, async_playwright, expect

from aun_runtime import (
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    Budgets,
    MessageContext,
    ToolCallPayload,
    ToolResultPayload,
    TransientError,
    UnknownAIDError,
    event,
)
from aun_runtime.console import Console
from aun_runtime.testing import Bouncer, Forwarder, Pondering, Raiser, Replier, Silent, Speaker

from .conftest import TEST_POLL_INTERVAL, TIMEOUT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_PRESENT = Path(CHROMIUM).exists()
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACT = Path(__file__).resolve().parents[2] / "artifacts" / "console.png"
WAIT_MS = TIMEOUT * 1000


class Reporter(AUNAgent):
    """Answers a question three times, naming the asker, once the test lets it."""

    def __init__(self) -> None:
        super().__init__("answers each question three times")
        self.go = asyncio.Event()

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.go.wait()
        asker = [message.from_aid] if message.group_id else None
        await self.reply("Yesterday: the mailbox bound.", mentions=asker)
        await self.reply("Today: the console.", mentions=asker)
        await self.reply("No blockers.", mentions=asker)


class Observer(AUNAgent):
    """Reads everything, and decides, each time, that it has nothing to add."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.think("__SILENT__ nothing to add to that")


class Coder(AUNAgent):
    """Runs its own test tool when asked, shows that it did, and says how it went."""

    agent_md = (
        "---\naid: coder.local\nname: Coder\ntype: codeagent\nversion: 1.2.0\n"
        "description: Runs its own test tool when asked\ntags: [python, tests]\n---\n"
        "# Coder\nAsk it to run the tests; it shows its tool use and says how it went.\n"
    )

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(ToolCallPayload(call_id="t1", name="run_tests", arguments={"path": "tests/"}))
        await self.reply(ToolResultPayload(call_id="t1", ok=True, result="12 passed"))
        await self.reply("All 12 tests pass.")
        # A follow-up that does not say what it answers still belongs to the thread it was sent in.
        await self.send(message.from_aid, "Coverage report follows.")


def _fate(transcript: str, text: str) -> str:
    """The transcript's line on what became of the message whose text is `text`."""
    lines = transcript.splitlines()
    (at,) = [n for n, line in enumerate(lines) if line.endswith(f": {text!r}")]
    return lines[at + 1].strip()


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    if not CHROMIUM_PRESENT:
        pytest.fail(f"{CHROMIUM} is missing: install Debian's browser with `apt-get install -y chromium`")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 760})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        # A page whose console went away keeps retrying: the browser logs each refused connection.
        # That is the page doing its job; any other error is a fault of the page.
        page.on(
            "console",
            lambda msg: (
                errors.append(msg.text)
                if msg.type == "error" and "ERR_CONNECTION_REFUSED" not in msg.text
                else None
            ),
        )
        yield page
        await browser.close()
        assert errors == [], f"the page reported errors: {errors}"


def _thread(page: Page, text: str) -> Locator:
    """The top-level message (with its replies) whose own text is ``text``."""
    return page.locator("#timeline > article.msg").filter(has=page.locator(":scope > .text", has_text=text))


def _status(message: Locator) -> Locator:
    return message.locator(":scope > header .status")


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", css)[:3])


def _reddish(css: str) -> bool:
    r, g, b = _rgb(css)
    return r - max(g, b) > 60


async def _open(page: Page, side_text: str) -> None:
    await page.locator("#side a.item", has_text=side_text).click()
    await expect(page.locator("#view-header h2")).to_have_text(side_text, timeout=WAIT_MS)


async def test_console_shows_a_live_scenario_with_autonomous_semantics(page: Page) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    async with Console(runtime, poll_interval=TEST_POLL_INTERVAL) as console:
        await page.goto(console.url)
        await expect(page.locator("#conn")).to_have_text("live", timeout=WAIT_MS)
        await expect(page.locator("#access")).to_have_text("read-only")

        # The scenario starts with the page already open.
        await runtime.register_agent("thrice.local", Reporter)
        await runtime.register_agent("quiet.local", Observer)
        inbox = await runtime.open_inbox("app.local")
        await runtime.create_group(
            "standup", ["thrice.local", "quiet.local", "herald.local", "app.local"], dispatch_mode="mention"
        )
        await runtime.register_agent(
            "herald.local",
            lambda: Speaker("Stand-up time. thrice, what's new?", group="standup", mentions=["thrice.local"]),
            description="opens the stand-up on its own",
            eager=True,
        )

        # A message an agent sent on its own, answering nothing, is marked proactive.
        await _open(page, "#standup")
        opening = _thread(page, "Stand-up time.")
        await expect(opening.locator(":scope > header .tag.proactive")).to_have_text(
            "proactive", timeout=WAIT_MS
        )
        await expect(opening.locator(".replies")).to_have_count(
            0
        )  # nothing answered it yet, and that is fine

        # Three replies, arriving later, are grouped under the message they answer.
        (await runtime.agent_instance("thrice.local", Reporter)).go.set()
        replies = opening.locator(":scope > .replies > article.msg")
        await expect(replies).to_have_count(3, timeout=WAIT_MS)
        await expect(replies.locator(":scope > .text")).to_have_text(
            ["Yesterday: the mailbox bound.", "Today: the console.", "No blockers."]
        )
        await expect(opening.locator(":scope > .replies > .replies-head")).to_have_text("3 replies")
        await expect(page.locator("#timeline > article.msg")).to_have_count(1)  # the replies are not loose

        # A message nobody answers is delivered: a neutral state, never an error.
        await inbox.send("quiet.local", "Anyone home?")
        await _open(page, "app.local ↔ quiet.local")
        silent = _thread(page, "Anyone home?")
        await expect(_status(silent)).to_have_text("delivered", timeout=WAIT_MS)
        await expect(_status(silent)).to_have_attribute("data-status", "delivered")
        await expect(silent).not_to_have_class(re.compile(r"\b(failure|status-dead)\b"))
        await expect(silent.locator(".alert")).to_have_count(0)
        await expect(silent.locator(":scope > .new, :scope > header .tag.new")).to_have_text(
            "new conversation"
        )
        status_style = await _status(silent).evaluate(
            "el => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]"
        )
        assert not any(_reddish(css) for css in status_style), status_style
        await expect(page.locator("#main")).not_to_contain_text(re.compile("unanswered|no reply", re.I))
        # The observer's decision to stay silent is there, muted, behind the toggle.
        decision = silent.locator(".thought")
        await expect(decision).to_be_hidden()

        # A message a mention-mode channel kept from everyone is archived: hidden until asked for.
        await inbox.group_send("standup", "Lunch at noon, for whoever reads this.")
        await inbox.group_send("standup", "quiet, any objections?", mentions=["quiet.local"])
        await _open(page, "#standup")
        filtered = _thread(page, "Lunch at noon")
        await expect(_thread(page, "quiet, any objections?")).to_be_visible(timeout=WAIT_MS)
        await expect(filtered).to_have_count(1)
        await expect(filtered).to_be_hidden()
        await page.check("#show-muted")
        await expect(filtered).to_be_visible()
        await expect(filtered).to_have_class(re.compile(r"\bmuted\b"))
        await expect(_status(filtered)).to_have_text("filtered · archived")
        await expect(filtered.locator(".fate-filtered").first).to_contain_text("mention mode: not mentioned")
        objection = _thread(page, "quiet, any objections?")
        await expect(objection.locator(".thought")).to_contain_text("quiet.local decided to stay silent")
        await expect(objection.locator(":scope > header .tag.new")).to_have_text("new conversation")
        await expect(objection.locator(":scope > header .tag.proactive")).to_have_count(
            0
        )  # the app is no agent

        await page.locator("#view").evaluate("el => { el.scrollTop = 0; }")
        ARTIFACT.parent.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACT))
        await page.uncheck("#show-muted")
        await expect(filtered).to_be_hidden()
        await page.close()  # before the console stops, so the page does not try to reconnect
    await runtime.close()


async def test_console_highlights_failures_and_draws_tool_use_as_annotations(page: Page) -> None:
    runtime = AUNRuntime(max_hops=4)
    await runtime.start()
    async with Console(runtime, poll_interval=TEST_POLL_INTERVAL, allow_send=True) as console:
        await page.goto(console.url)
        await expect(page.locator("#conn")).to_have_text("live", timeout=WAIT_MS)
        await expect(page.locator("#access")).to_have_text("sending enabled")
        await runtime.register_agent("coder.local", Coder)
        await runtime.register_agent("raiser.local", Raiser)
        await runtime.register_agent("ping.local", Bouncer)
        await runtime.register_agent("pong.local", Bouncer)
        inbox = await runtime.open_inbox("app.local")

        # tool_call / tool_result: one note on the sender's own tool use, with its outcome.
        await inbox.send("coder.local", "please run the tests")
        await _open(page, "app.local ↔ coder.local")
        request = _thread(page, "please run the tests")
        replies = request.locator(":scope > .replies > article.msg")
        await expect(replies).to_have_count(3, timeout=WAIT_MS)  # the tool note, the answer, a follow-up
        note = replies.nth(0).locator(".tool-note")
        await expect(note).to_contain_text("coder.local used its tool run_tests")
        await expect(note.locator(".tool-result.ok")).to_contain_text("12 passed")
        await expect(replies.nth(1).locator(":scope > .text")).to_have_text("All 12 tests pass.")
        await expect(replies.nth(2).locator(":scope > .text")).to_have_text("Coverage report follows.")
        # Counted as the transcript counts them, for the same archive: the tool note is no reply.
        await expect(request.locator(":scope > .replies > .replies-head")).to_have_text("2 replies")
        assert _fate(runtime.transcript(), "please run the tests") == "delivered to coder.local · 2 replies"

        # A dead letter stands out in red; so does a handler failure; a loop stop in amber.
        with pytest.raises(UnknownAIDError):
            await inbox.send("nobody.local", "hello?")
        await inbox.send("raiser.local", "boom")
        await runtime.send("pong.local", "ping", sender="ping.local")
        await expect(page.locator("#failures-link")).to_have_text(
            "2 dead letters · 1 loop stop", timeout=WAIT_MS
        )
        await _open(page, "app.local ↔ nobody.local")
        lost = _thread(page, "hello?")
        await expect(_status(lost)).to_have_text("dead letter")
        await expect(lost).to_have_class(re.compile(r"\bfailure\b"))
        assert _reddish(await _status(lost).evaluate("el => getComputedStyle(el).backgroundColor"))
        await expect(lost.locator(".alert.dead-letter")).to_contain_text("UnknownAIDError")

        await _open(page, "app.local ↔ raiser.local")
        failed = _thread(page, "boom")
        # It arrived, and the handler failed on it: a failure, in red, never a calm "✓ delivered".
        await expect(_status(failed)).to_have_text("delivered · dead letter")
        await expect(_status(failed)).to_have_attribute("data-status", "dead")
        await expect(failed).to_have_class(re.compile(r"\bfailure\b"))
        assert _reddish(await _status(failed).evaluate("el => getComputedStyle(el).backgroundColor"))
        shown = await _status(failed).evaluate("el => getComputedStyle(el, '::before').content")
        assert "✓" not in shown, shown
        await expect(failed.locator(".alert.dead-letter")).to_contain_text("dead letter at raiser.local")

        await _open(page, "ping.local ↔ pong.local")
        stopped = page.locator("article.msg.status-stopped")
        await expect(stopped).to_have_count(1, timeout=WAIT_MS)
        await expect(stopped.locator(".alert.loop-stop")).to_contain_text("loop guard stopped")

        await page.locator("#failures-link").click()
        await expect(page.locator("#view .alert")).to_have_count(3)

        # The agent's card: AID, mode and description from the runtime, and its agent.md.
        await page.locator("#agents a.item", has_text="coder.local").click()
        card = page.locator(".card")
        await expect(card).to_contain_text("autonomous")
        await expect(card).to_contain_text("Runs its own test tool when asked")
        await expect(card.locator(".agent-md h3")).to_have_text("agent.md: Coder")
        await expect(card.locator(".agent-md .tag-chip")).to_have_text(["python", "tests"])
        await expect(card.locator(".agent-md-body")).to_contain_text("Ask it to run the tests")
        await page.locator("#agents a.item", has_text="raiser.local").click()
        await expect(page.locator(".card .hint")).to_contain_text("No agent.md card registered")

        # Sending is on for this console: the page speaks as a local agent, through its send tool.
        await _open(page, "app.local ↔ coder.local")
        await expect(page.locator("#c-mentions-label")).to_be_hidden()  # mentions are for groups
        await page.locator("#c-from").select_option("app.local")
        await expect(page.locator("#c-to")).to_have_value("coder.local")
        await page.locator("#c-text").fill("and the linters?")
        await page.locator("#composer button[type=submit]").click()
        asked = _thread(page, "and the linters?")
        await expect(asked.locator(":scope > .replies > article.msg")).to_have_count(3, timeout=WAIT_MS)
        assert any(m.message and m.message.text == "and the linters?" for m in runtime.archive.records())

        # An answer sent in another conversation is pointed to from the message it answers.
        await runtime.register_agent("fwd.local", lambda: Forwarder(to="raiser.local"))
        await inbox.send("fwd.local", "pass it on")
        await _open(page, "app.local ↔ fwd.local")
        elsewhere = _thread(page, "pass it on").locator(".elsewhere")
        await expect(elsewhere).to_have_text("answered in fwd.local ↔ raiser.local", timeout=WAIT_MS)
        await elsewhere.locator("a").click()
        await expect(page.locator("#view-header h2")).to_have_text("fwd.local ↔ raiser.local")
        await expect(_thread(page, "fwd: pass it on").locator(":scope > header .tag.re")).to_have_text(
            "re “pass it on” in app.local ↔ fwd.local"
        )
        await page.close()  # before the console stops, so the page does not try to reconnect
    await runtime.close()


async def test_what_the_toggle_hides_leaves_no_empty_header_or_stray_separator(page: Page) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    async with Console(runtime, poll_interval=TEST_POLL_INTERVAL) as console:
        await page.goto(console.url)
        await expect(page.locator("#conn")).to_have_text("live", timeout=WAIT_MS)
        await runtime.register_agent("echo.local", lambda: Replier(times=2, mentions=[]))
        await runtime.register_agent("quiet.local", Silent)
        inbox = await runtime.open_inbox("app.local")
        await runtime.create_group(
            "desk", ["echo.local", "quiet.local", "app.local"], dispatch_mode="mention"
        )

        # Delivered to echo, filtered for quiet; echo's two replies name nobody, so the channel keeps
        # them from everyone: both are filtered, and hidden until the toggle is on.
        await inbox.group_send("desk", "echo, twice please", mentions=["echo.local"])
        await _open(page, "#desk")
        asked = _thread(page, "echo, twice please")
        box = asked.locator(":scope > .replies")
        await expect(box.locator(":scope > article.msg")).to_have_count(2, timeout=WAIT_MS)
        await expect(box.locator(":scope > article.msg.muted")).to_have_count(2)
        # No "2 replies" header standing over nothing.
        await expect(box).to_be_hidden()
        await expect(asked.locator(".replies-head")).to_be_hidden()
        # The fate line ends with what is shown, not with the separator of the hidden part.
        fate = asked.locator(":scope > .fate")
        await expect(fate).to_have_text("delivered to echo.local", use_inner_text=True)

        await page.check("#show-muted")
        await expect(box).to_be_visible()
        await expect(box.locator(":scope > .replies-head")).to_have_text("2 replies")
        await expect(fate).to_have_text(
            "delivered to echo.local · filtered for quiet.local (mention mode: not mentioned; archived)",
            use_inner_text=True,
        )
        await page.close()  # before the console stops, so the page does not try to reconnect
    await runtime.close()


async def test_console_shows_budget_stops_like_loop_stops_under_the_message_they_concern(page: Page) -> None:
    runtime = AUNRuntime(budgets=Budgets(thread_messages=3))
    await runtime.start()
    async with Console(runtime, poll_interval=TEST_POLL_INTERVAL, allow_send=True) as console:
        await page.goto(console.url)
        await expect(page.locator("#conn")).to_have_text("live", timeout=WAIT_MS)
        await runtime.register_agent("ping.local", Bouncer)
        await runtime.register_agent("pong.local", Bouncer)
        await runtime.register_agent("ponder.local", Pondering, budgets=Budgets(model_calls_per_thread=1))
        inbox = await runtime.open_inbox("app.local")

        # A refused send: the thread holds three messages, so pong's answer to the third is refused.
        await runtime.send("pong.local", "ping", sender="ping.local")
        # A refused model call: ponder's second call about the same message is never made.
        await inbox.send("ponder.local", "what do you think?")
        await expect(page.locator("#failures-link")).to_have_text(
            "0 dead letters · 0 loop stops · 2 budget stops", timeout=WAIT_MS
        )

        # The refused message is drawn like a loop-stopped one, among the replies to what it answered.
        await _open(page, "ping.local ↔ pong.local")
        third = page.locator("article.msg").filter(
            has=page.locator(":scope > .text", has_text=re.compile(r"^re: re: ping$"))
        )
        await expect(third).to_have_count(1, timeout=WAIT_MS)
        stopped = third.locator(":scope > .replies > article.msg")
        await expect(stopped).to_have_count(1)
        await expect(stopped).to_have_class(re.compile(r"\bstatus-stopped\b"))
        await expect(stopped).to_have_class(re.compile(r"\bfailure\b"))
        await expect(_status(stopped)).to_have_text("stopped by budget")
        await expect(stopped.locator(":scope > .text")).to_have_text("re: re: re: ping")
        alert = stopped.locator(":scope > .alert.budget-stop")
        await expect(alert).to_contain_text("budget stop for pong.local:")
        await expect(alert).to_contain_text("thread_messages=3")
        await expect(third.locator(":scope > .alert")).to_have_count(0)  # on the refused one only
        # Amber, the colour of a stop, not the red of a dead letter.
        colour, stop = await alert.evaluate(
            "el => [getComputedStyle(el).color,"
            " getComputedStyle(document.documentElement).getPropertyValue('--stop').trim()]"
        )
        assert _rgb(colour) == tuple(int(stop[i : i + 2], 16) for i in (1, 3, 5)), (colour, stop)

        # A refused model call is drawn on the message being handled, which was delivered.
        await _open(page, "app.local ↔ ponder.local")
        asked = _thread(page, "what do you think?")
        await expect(_status(asked)).to_have_text("delivered", timeout=WAIT_MS)
        await expect(asked).to_have_class(re.compile(r"\bfailure\b"))
        await expect(asked.locator(":scope > .alert.budget-stop")).to_contain_text(
            "budget stop for ponder.local:"
        )
        await expect(asked.locator(":scope > .alert.budget-stop")).to_contain_text("model_calls_per_thread=1")
        await expect(asked.locator(".replies")).to_have_count(0)  # the handler ended without an answer

        # The failures view lists both, with their own label, each linking to its conversation.
        await page.locator("#failures-link").click()
        stops = page.locator("#view .alert.budget-stop")
        await expect(stops).to_have_count(2)
        await expect(stops.filter(has_text="budget stop for pong.local:")).to_have_count(1)
        model_stop = stops.filter(has_text="budget stop for ponder.local:")
        await expect(model_stop).to_have_count(1)
        await expect(page.locator("#view .alert.loop-stop, #view .alert.dead-letter")).to_have_count(0)
        await model_stop.locator("a.open").click()
        await expect(page.locator("#view-header h2")).to_have_text("app.local ↔ ponder.local")
        await page.close()  # before the console stops, so the page does not try to reconnect
    await runtime.close()


class Recovering(AUNAgent):
    """Fails for a passing cause until the test says it has recovered, then answers."""

    recovered = False

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        if not Recovering.recovered:
            raise TransientError("the model is down")
        await self.reply("back, and answering")


async def test_a_retryable_dead_letter_is_redriven_from_the_failures_view(page: Page) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    async with Console(runtime, poll_interval=TEST_POLL_INTERVAL, allow_send=True) as console:
        await page.goto(console.url)
        await expect(page.locator("#conn")).to_have_text("live", timeout=WAIT_MS)
        await runtime.register_agent("flaky.local", Recovering)
        inbox = await runtime.open_inbox("app.local")
        await inbox.send("flaky.local", "are you there?")
        await expect(page.locator("#failures-link")).to_have_text("1 dead letter · 0 loop stops", timeout=WAIT_MS)
        await page.locator("#failures-link").click()
        dead = page.locator("#view .alert.dead-letter")
        await expect(dead).to_contain_text("retryable: TransientError: the model is down")
        Recovering.recovered = True
        await dead.locator("button.redrive").click()
        await expect(dead.locator(".redriven")).to_have_text("redriven", timeout=WAIT_MS)
        assert await inbox.next(timeout=TIMEOUT) is not None
        assert [m.text for m in inbox.received] == ["back, and answering"]
        await page.locator("#agents a", has_text="flaky.local").click()
        await expect(page.locator("#view dd.busy")).to_have_text("idle", timeout=WAIT_MS)
        await page.close()
    await runtime.close()


async def test_page_resumes_after_the_console_restarts_without_repeats(page: Page) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    await runtime.register_agent("coder.local", Coder)
    inbox = await runtime.open_inbox("app.local")
    first = Console(runtime, poll_interval=TEST_POLL_INTERVAL)
    await first.start()
    port = first.address[1]
    await page.goto(first.url)
    await inbox.send("coder.local", "before the restart")
    await _open(page, "app.local ↔ coder.local")
    await expect(
        _thread(page, "before the restart").locator(":scope > .replies > article.msg")
    ).to_have_count(3, timeout=WAIT_MS)
    await first.stop()
    await expect(page.locator("#conn")).to_have_text("reconnecting…", timeout=WAIT_MS)

    await inbox.send("coder.local", "while the console was down")
    async with Console(runtime, port=port, poll_interval=TEST_POLL_INTERVAL):
        # The browser reconnects by itself, with the id of the last record it had: it gets the rest.
        await expect(page.locator("#conn")).to_have_text("live", timeout=WAIT_MS)
        resumed = _thread(page, "while the console was down")
        await expect(resumed.locator(":scope > .replies > article.msg")).to_have_count(3, timeout=WAIT_MS)
        await expect(_thread(page, "before the restart")).to_have_count(1)  # nothing came twice
        await expect(page.locator("#timeline > article.msg")).to_have_count(2)
        await page.close()
    await runtime.close()
