"""`HumanAgent`: a person takes part as an AID, from a terminal.

The person is an agent like any other: what is sent to the AID, and posted to its groups, arrives in
its mailbox, one message at a time, in arrival order. For each one the agent shows the message and
asks for a line:

| the person types | the agent |
|---|---|
| some text | replies with it (in a group, to the group; in a `mention` group it names the asker) |
| an empty line | says nothing: silence is a legal answer |
| `/send AID text` | sends `text` to `AID` |
| `/post GROUP text` | posts `text` to `GROUP` |
| `/quit`, or the input ends | says nothing from now on (what arrives is still shown, and archived) |

An agent's notes on its own tool use (`tool_call`, `tool_result`) are shown, and not asked about.
A person who does not answer within `answer_timeout` seconds has said nothing, and the next message
is shown: one who walked away never holds the mailbox for good.

Lines come from an `InputSource`: `TerminalInput` reads standard input (a terminal, or lines piped
in), `ScriptedInput` a list of lines given in advance (tests, demonstrations). In a browser, the
console does the same job: open the person's AID as an inbox and run the app with
`--console --allow-send` (see the documentation's page on people in the loop).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterable
from typing import Protocol, TextIO

from aun_runtime import AUNAgent, AUNError, AUNMessage, MessageContext, ToolCallPayload, event

__all__ = ["DEFAULT_ANSWER_TIMEOUT", "PROMPT", "HumanAgent", "InputSource", "ScriptedInput", "TerminalInput"]

#: Seconds a person may take over one message before the agent moves on, having said nothing. Four
#: minutes is time to read a message and type a few lines; it is under the runtime's default handler
#: timeout (300 s), so a person who walked away has said nothing (a thought) and the mailbox moves
#: on, instead of the turn being cut off (a dead letter). Raise `handler_timeout` with it for longer
#: waits. The agentchat adapter's person (`agents.agentchat.DEFAULT_INPUT_TIMEOUT`) waits as long.
DEFAULT_ANSWER_TIMEOUT = 240.0
#: What the person is shown when a line is wanted.
PROMPT = "> "


class InputSource(Protocol):
    """Where a person's lines come from."""

    #: True when the source shows what the person typed itself (a terminal echoes it); else the agent
    #: prints each line after its prompt, so that the screen reads as a conversation.
    shows_input: bool

    async def read_line(self) -> str | None:
        """The person's next line (without its newline), or None when there is no more input."""
        ...


class ScriptedInput:
    """Lines given in advance, read one per prompt; then the input ends."""

    shows_input = False

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = list(lines)

    async def read_line(self) -> str | None:
        return self._lines.pop(0) if self._lines else None


class TerminalInput:
    """Standard input (or `stream`), read line by line in a thread of its own.

    The thread is a daemon: a program may end while the person has not finished a line. A read that
    the agent stopped waiting for (its answer timed out) is not lost: it is the next line read.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdin
        self.shows_input = self._stream.isatty()
        self._pending: asyncio.Future[str] | None = None

    async def read_line(self) -> str | None:
        if self._pending is None:
            loop = asyncio.get_running_loop()
            pending: asyncio.Future[str] = loop.create_future()

            def read() -> None:
                line = self._stream.readline()
                loop.call_soon_threadsafe(lambda: pending.done() or pending.set_result(line))

            threading.Thread(target=read, name="human-input", daemon=True).start()
            self._pending = pending
        line = await asyncio.shield(self._pending)
        self._pending = None
        return None if line == "" else line.rstrip("\r\n")


class HumanAgent(AUNAgent):
    """A person taking part as an AID: reads what arrives, and answers, stays silent or speaks.

    Args:
        source: where the person's lines come from (default: standard input).
        out: where messages and prompts are shown (default: standard output).
        answer_timeout: seconds to wait for the person's line before saying nothing.
        description: one line for metadata and the console.
    """

    def __init__(
        self,
        source: InputSource | None = None,
        *,
        out: TextIO | None = None,
        answer_timeout: float = DEFAULT_ANSWER_TIMEOUT,
        description: str = "a person, answering from a terminal",
    ) -> None:
        super().__init__(description)
        if answer_timeout <= 0:
            raise ValueError("answer_timeout must be a positive number of seconds")
        self.source: InputSource = source if source is not None else TerminalInput()
        self.out = out
        self.answer_timeout = answer_timeout
        self.gone = False  # the input ended, or the person typed /quit

    def _show(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.out if self.out is not None else sys.stdout, flush=True)

    @event
    async def on_arrival(self, message: AUNMessage, ctx: MessageContext) -> None:
        where = f"#{message.group_id} " if message.group_id else ""
        if message.is_annotation:
            payload = message.payload
            what = f"used its tool {payload.name}" if isinstance(payload, ToolCallPayload) else "got its tool's result"
            self._show(f"{where}({message.from_aid} {what})")
            return
        self._show(f"{where}{message.from_aid}: {message.text if message.text is not None else message.payload.type}")
        if self.gone:
            return
        line = await self._ask()
        if line is None:
            return
        if line.startswith("/"):
            await self._command(line)
        elif line.strip():
            await self.reply(line)
        else:
            self.think("said nothing")

    async def _ask(self) -> str | None:
        self._show(PROMPT, end="")
        try:
            line = await asyncio.wait_for(self.source.read_line(), self.answer_timeout)
        except TimeoutError:
            self._show(f"(no answer within {self.answer_timeout:g} s: said nothing)")
            self.think(f"no answer within {self.answer_timeout:g} s")
            return None
        if line is None:
            self._show("(end of input: saying nothing from now on)")
            self.gone = True
            return None
        if not self.source.shows_input:
            self._show(line if line.strip() else "(nothing)")
        return line

    async def _command(self, line: str) -> None:
        name, _, rest = line.partition(" ")
        target, _, text = rest.strip().partition(" ")
        if name == "/quit":
            self.gone = True
        elif name in ("/send", "/post") and target and text.strip():
            try:
                if name == "/send":
                    await self.send(target, text.strip())
                else:
                    await self.group_send(target.lstrip("#"), text.strip())
            except AUNError as exc:  # a mistyped AID or group: a dead letter, as any, and the person is told
                self._show(f"(not sent: {exc})")
        else:
            self._show("(say /send AID text, /post GROUP text, /quit, or just type your answer)")
            line = await self._ask()
            if line is not None and line.startswith("/"):
                await self._command(line)
            elif line is not None and line.strip():
                await self.reply(line)
