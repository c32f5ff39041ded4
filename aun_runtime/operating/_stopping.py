"""How a command ends: the signals it stops on, the grace its turns get, and its exit code.

Every long-running command (`run` with any option, `demo`, `worker`, `host`, `gateway`,
`console`) runs through `run_command`, so they all stop the same way:

* **SIGINT (Ctrl-C) or SIGTERM** asks the command to stop. It says so on stderr, starts no new
  turn, gives the turns in flight `STOP_GRACE` seconds, then cancels what still runs (each
  such message is recorded: a dead letter, or on a worker unacknowledged, so it is sent again), runs
  the application's teardown (each part within `DEFAULT_ON_STOP_TIMEOUT`) and exits.
* **A second signal** exits at once.
* **Nothing holds the process**: whatever hangs (a handler that ignores cancellation, a library's
  shutdown, a thread, a handler running C code that holds the interpreter), the process is gone
  `EXIT_DEADLINE` seconds after the first signal, its threads' stacks printed: a watchdog process
  keeps the deadline, since nothing inside the process can (`ExitDeadline`).
  When the command ends by itself, the tasks it left behind (an application's workbench, tasks of
  its own) are cancelled and given `WIND_DOWN` seconds, and are left behind after that; a
  thread it left running holds the process for `WIND_DOWN` seconds at most (`bound_exit`).

Both signals get a handler of their own (a process started with `&` by a non-interactive shell
inherits SIGINT ignored, and would otherwise never hear Ctrl-C), installed with `signal.signal`
rather than on the event loop: a loop blocked by a handler that never awaits never runs its signal
callbacks, but a Python signal handler still runs (between two bytecodes of the main thread), so a
second signal works; the deadline does not even need that.

**Exit codes** are the same for every command, named by `ExitCode` and listed once, with what a
configuration error, a runtime failure and a bug each print, in the docs (Running, "Exit codes");
`aun_runtime.operating._command_errors` sorts what stops a command into them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from enum import IntEnum
from types import FrameType
from typing import Any, TypeVar

from ._exit_deadline import ExitDeadline

__all__ = [
    "EXIT_DEADLINE",
    "STOP_GRACE",
    "WIND_DOWN",
    "ExitCode",
    "StopRequest",
    "bound_exit",
    "json_line",
    "run_command",
    "say_as_json",
    "saying_json",
]

T = TypeVar("T")

#: Seconds the turns in flight get to end after a signal, before they are cancelled. A code agent's
#: turn takes milliseconds; a model agent's turn waits on its model and tools, and most of one that
#: is under way ends within a few seconds. Five leaves time for the closing of the archive and the
#: application's teardown within :data:`EXIT_DEADLINE`.
STOP_GRACE = 5.0
#: Seconds after the first signal by which the process is gone, however it is stuck: the grace,
#: the application's teardown (3 s) and the closing of the archive fit in it with room to spare.
EXIT_DEADLINE = 10.0
#: Seconds the tasks a command left behind get to end once cancelled, before they are left behind
#: (an MCP client gives its server two seconds to exit before it terminates it).
WIND_DOWN = 3.0


class ExitCode(IntEnum):
    """How a command ended (see the module docstring); a signal `N` gives `128 + N`."""

    OK = 0
    FAILED = 1
    USAGE = 2


_say_as_json = False


def say_as_json(on: bool) -> None:
    """Say how a command stops as JSON log lines (`--log-format json`), as every other line on stderr is then."""
    global _say_as_json
    _say_as_json = on


def saying_json() -> bool:
    """Whether a command's own lines on stderr are JSON log lines (`--log-format json`)."""
    return _say_as_json


def json_line(text: str, level: str) -> str:
    """`text` as one JSON log line, the shape `--log-format json` gives every line on stderr."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    return json.dumps({"time": stamp, "level": level, "logger": "aun_runtime", "message": text})


def _say(text: str) -> None:
    # Written with os.write: a signal handler may interrupt a print to the same stream.
    line = json_line(text, "WARNING") if _say_as_json else f"aun-runtime: {text}"
    with contextlib.suppress(OSError):
        os.write(2, f"{line}\n".encode())


class StopRequest:
    """Whether, and by which signal, a command has been asked to stop.

    Args:
        serving: a signal is how this command is meant to end (it serves until stopped), so a clean
            stop on one exits 0; else a signal interrupts it (exit 128 + N).
    """

    def __init__(self, *, serving: bool) -> None:
        self.serving = serving
        #: The first signal received, if any.
        self.signal: int | None = None
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Keeps `EXIT_DEADLINE` from outside the process when set (see `ExitDeadline`).
        self.deadline: ExitDeadline | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Tie the request to the loop the command runs on."""
        self._loop = loop
        self._event = asyncio.Event()
        if self.signal is not None:
            self._event.set()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: runs in the main thread, whatever the event loop is doing."""
        name = signal.Signals(signum).name
        if self.signal is not None:
            _say(f"second {name}: exiting at once (exit {128 + signum})")
            os._exit(128 + signum)
        self.signal = signum
        _say(f"{name}: stopping; turns in flight get {STOP_GRACE:g} s (a second {name} exits at once)")
        if self.deadline is None or not self.deadline.watching:
            # No watchdog (it could not start): a timer keeps the deadline, unless the interpreter is held.
            deadline = threading.Timer(EXIT_DEADLINE, self._overdue, (signum,))
            deadline.daemon = True
            deadline.start()
        if self._loop is not None and self._event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the command is ending anyway
                self._loop.call_soon_threadsafe(self._event.set)

    @staticmethod
    def _overdue(signum: int) -> None:
        _say(f"still running {EXIT_DEADLINE:g} s after {signal.Signals(signum).name}: exiting (exit {128 + signum})")
        os._exit(128 + signum)

    @property
    def requested(self) -> bool:
        """True once a signal has asked the command to stop."""
        return self.signal is not None

    async def wait(self) -> None:
        """Return once a signal has asked the command to stop."""
        assert self._event is not None, "attach() first"
        await self._event.wait()

    async def unless_stopped(self, work: Awaitable[T], *, cancel_wait: float = WIND_DOWN) -> tuple[bool, T | None]:
        """Await `work` unless a stop is requested first.

        Returns:
            `(True, its result)` if it finished first (its exception, if it raised, is raised here);
            `(False, None)` if the stop came first: `work` is cancelled then, and given
            `cancel_wait` seconds to end.
        """
        task = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if task.done():
            return True, task.result()
        task.cancel()
        await asyncio.wait({task}, timeout=cancel_wait)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: whatever it raised while being cancelled is moot now
        return False, None

    def exit_code(self, *, failed: bool) -> int:
        """The exit code of a command that stopped without missing its deadline."""
        if self.signal is not None and not self.serving:
            return 128 + self.signal
        return ExitCode.FAILED if failed else ExitCode.OK


def run_command(main: Callable[[StopRequest], Awaitable[int]], *, serving: bool) -> int:
    """Run `main(stop)` on a fresh event loop, with the signals handled as the module says;
    return its exit code.

    Unlike `asyncio.run`, the cleanup after `main` is bounded: tasks left behind get
    `WIND_DOWN` seconds once cancelled, and are then left behind rather than waited for.
    """
    stop = StopRequest(serving=serving)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    # Signal handlers belong to the main thread; a command run from another thread (a test) has none.
    handled = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
    previous = {signum: signal.signal(signum, stop.on_signal) for signum in handled}
    if handled:
        stop.deadline = ExitDeadline(EXIT_DEADLINE)
        stop.deadline.start()
    try:
        stop.attach(loop)
        return loop.run_until_complete(main(stop))
    finally:
        try:
            _wind_down(loop)
        finally:
            asyncio.set_event_loop(None)  # as asyncio.run: a library's atexit hook finds no loop
            loop.close()
            if stop.deadline is not None:
                stop.deadline.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def bound_exit(code: int) -> None:
    """The process ends with `code` within `WIND_DOWN` seconds of now, whatever holds it
    (a thread the application left running, which the interpreter would wait for, or a library's
    exit hook). For a command that owns its process: call it as the command returns."""
    timer = threading.Timer(WIND_DOWN, _exit_held, (code,))
    timer.daemon = True  # a clean exit does not wait for it
    timer.start()


def _exit_held(code: int) -> None:
    alive = [thread.name for thread in threading.enumerate() if not thread.daemon and thread is not threading.main_thread()]
    _say(f"the process was still held {WIND_DOWN:g} s after the command ended (threads: {', '.join(alive) or 'none'}); exiting")
    os._exit(code)


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in left:
        task.cancel()
    stuck: list[asyncio.Task[Any]] = []
    if left:
        loop.run_until_complete(asyncio.wait(left, timeout=WIND_DOWN))
        stuck = [task for task in left if not task.done()]
        if stuck:
            names = ", ".join(sorted({task.get_coro().__qualname__ for task in stuck}))  # type: ignore[union-attr]
            _say(f"{len(stuck)} task(s) left running did not end within {WIND_DOWN:g} s of being cancelled "
                 f"({names}); left behind")
        for task in left:
            if task.done() and not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler(
                    {"message": "a task left running raised as the command ended", "exception": task.exception(), "task": task}
                )
    if not stuck:  # a stuck task is still inside its generators: closing them would only fail
        _bounded(loop, loop.shutdown_asyncgens())
    _bounded(loop, loop.shutdown_default_executor())


def _bounded(loop: asyncio.AbstractEventLoop, closing: Awaitable[Any]) -> None:
    with contextlib.suppress(TimeoutError):
        loop.run_until_complete(asyncio.wait_for(closing, WIND_DOWN))
