"""Asking a person for a line, through an input function or the terminal, every wait bounded.

An input function is what agentchat's `UserProxyAgent` is given: `f(prompt) -> str`, or
`async f(prompt, cancellation_token) -> str`. `ask` calls one and waits at most `timeout` seconds:

* an async function runs in the turn's task; past the timeout it is cancelled and its
  cancellation token is cancelled too (for work it started beside itself);
* a plain function runs in a daemon thread of its own: past the timeout it is left to finish,
  and what it returns then is dropped. A daemon thread, not the event loop's executor, because
  a program's end waits for the executor's threads, so one call that never returns would keep
  the program from ending.

The terminal is asked by `TERMINAL`, read as the terminal's own person, `HumanAgent`, reads it:
one line at a time, in a daemon thread, the read kept across waits. A person who answers after the
wait was given up on is not lost: that line is the answer to the next question. (A
`UserProxyAgent` left with agentchat's default, `input` in a thread of the executor, loses that
line to a thread nobody waits for, and keeps a program from ending until someone presses Enter.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar, cast

from autogen_core import CancellationToken

from .human import TerminalInput

__all__ = ["TERMINAL", "InputEnded", "InputFunction", "TerminalQuestions", "ask"]

T = TypeVar("T")

#: What agentchat's UserProxyAgent accepts as its `input_func`.
InputFunction = Callable[[str], str] | Callable[[str, CancellationToken | None], Awaitable[str]]


class InputEnded(EOFError):
    """The person's input has ended (standard input closed): no answer will come any more."""


async def ask(input_func: InputFunction, prompt: str, *, timeout: float) -> str | None:
    """What `input_func` answers to `prompt`, or None if no answer came within `timeout` seconds."""
    if inspect.iscoroutinefunction(input_func):
        call = cast(Callable[[str, CancellationToken | None], Awaitable[str]], input_func)
        token = CancellationToken()
        try:
            async with asyncio.timeout(timeout) as deadline:
                return await call(prompt, token)
        except TimeoutError:
            if deadline.expired():
                return None
            raise  # the function's own TimeoutError: an error of the function, not a silence
        finally:
            token.cancel()  # nothing is waiting for what it started any more
    plain = cast(Callable[[str], str], input_func)
    answer: concurrent.futures.Future[str] = concurrent.futures.Future()
    # Running: a wait given up on cannot cancel it, so the thread can still settle it when it returns.
    answer.set_running_or_notify_cancel()
    threading.Thread(target=_settle, args=(answer, lambda: plain(prompt)), name="person-input", daemon=True).start()
    return await _wait(answer, timeout)


class TerminalQuestions:
    """Questions to the person at this process's terminal: the prompt on standard output, the answer
    a line of standard input, read by [`TerminalInput`][agents.human.TerminalInput] (a daemon
    thread; a read given up on is kept for the next question).

    Questions take turns: two AIDs answered from one terminal each wait for the other's question to
    be answered (or given up on) before theirs is shown, so that a line answers the question shown.
    """

    def __init__(self) -> None:
        self._input: TerminalInput | None = None  # made at the first question: stdin may be absent before
        self._turns: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def ask(self, prompt: str, *, timeout: float) -> str | None:
        """The next line typed (without its newline), or None if none came within `timeout`.

        Raises:
            InputEnded: standard input is closed.
        """
        async with self._turn():
            print(prompt, end="", flush=True)
            if self._input is None:
                self._input = TerminalInput()
            try:
                line = await asyncio.wait_for(self._input.read_line(), timeout)
            except TimeoutError:
                print(f"\n(no answer within {timeout:g} s: said nothing)", flush=True)
                return None
        if line is None:
            raise InputEnded("standard input is closed")
        return line

    def _turn(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._turns is None or self._turns[0] is not loop:  # an asyncio lock serves one loop
            self._turns = (loop, asyncio.Lock())
        return self._turns[1]


#: The questions to this process's terminal: one reader of its standard input.
TERMINAL: Final = TerminalQuestions()


def _settle(future: concurrent.futures.Future[str], work: Callable[[], str]) -> None:
    try:
        future.set_result(work())
    except BaseException as exc:  # whatever the function raised is its answer's outcome
        future.set_exception(exc)


async def _wait(future: concurrent.futures.Future[T], timeout: float) -> T | None:
    """The future's result, or None if it has none within `timeout` (the future itself runs on)."""
    waiting = asyncio.wrap_future(future)
    try:
        done, _ = await asyncio.wait({waiting}, timeout=timeout)
    finally:
        if not waiting.done():
            waiting.cancel()  # only this wait: the call it waits for is running, and runs on
    return waiting.result() if done else None
