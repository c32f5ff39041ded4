"""The exit deadline that nothing in the process can starve: a watchdog process.

A command that got SIGINT or SIGTERM must be gone `EXIT_DEADLINE` seconds later, however it is
stuck. Nothing inside the process can promise that: a handler running C code that holds the
interpreter (`re.match(r"(a+)+$", "a" * 34 + "b")` runs for an hour and never lets go) starves
every other thread, a `threading.Timer` included, and even the Python signal handler, which only
runs between two bytecodes of the main thread. So the deadline is kept from outside:

* At the start of the command, a small watchdog process is started (this file, run as a script by
  the same interpreter with `-I -S`: no site, nothing of the project imported) and given the read
  end of a pipe. The write end is the process's signal wakeup fd (`signal.set_wakeup_fd`): the
  interpreter's C-level signal handler writes the signal's number there the moment a signal
  arrives, without the interpreter lock.
* The first SIGINT or SIGTERM byte starts the watchdog's clock. At the deadline, if the command's
  process is still its parent, it says so on stderr, has the process print every thread's stack
  (`faulthandler`, registered on `DUMP_SIGNAL`: its C handler needs no lock either) and, half a
  second later, kills it (SIGKILL: exit 137). A second signal brings the deadline to
  `SECOND_SIGNAL_GRACE` seconds: the process exits at once by itself whenever it can.
* When the command ends, the pipe is closed and the watchdog exits; it exits as well when its
  parent is gone (the pipe closes with it), and it never acts on a process that is no longer its
  parent, so a reused process id is never signalled. It ignores SIGINT and SIGTERM and runs in a
  session of its own: a Ctrl-C meant for the command does not reach it.

`DUMP_SIGNAL` (SIGUSR2) stays registered while the command runs, so `kill -USR2 PID` shows where
each thread of a running command is, however stuck it is.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import select
import signal
import subprocess
import sys
import time

__all__ = ["DUMP_SIGNAL", "SECOND_SIGNAL_GRACE", "ExitDeadline"]

#: The signal on which a command prints every thread's stack (and which the watchdog sends).
DUMP_SIGNAL = signal.SIGUSR2
#: Seconds before the deadline at which the stacks are printed: they are written by then.
_DUMP_LEAD = 0.5
#: Seconds a second SIGINT or SIGTERM leaves the process: it exits at once by itself (exit 128 + N)
#: whenever its signal handler can run; when the interpreter is held, the watchdog ends it then.
SECOND_SIGNAL_GRACE = 2.0
#: Seconds between two looks at whether the watchdog's parent is still there.
_PARENT_CHECK = 1.0
#: Seconds a command that ends waits for its watchdog to exit.
_WATCHDOG_EXIT = 2.0


class ExitDeadline:
    """The watchdog of one command, started by `start` and ended by `close` (see the module).

    Args:
        seconds: how long after the first SIGINT or SIGTERM the process may live.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._write_fd = -1
        self._previous_wakeup_fd = -1
        self._dumping = False

    @property
    def watching(self) -> bool:
        """True while a watchdog keeps the deadline."""
        return self._watchdog is not None

    def start(self) -> None:
        """Start the watchdog (main thread only). If it cannot start, `watching` stays False."""
        read_fd, write_fd = os.pipe()
        try:
            os.set_blocking(write_fd, False)  # the signal handler must never block on it
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, str(os.getpid()), str(read_fd), str(self.seconds)],
                pass_fds=(read_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError:
            os.close(write_fd)
            return
        finally:
            os.close(read_fd)
        self._write_fd = write_fd
        self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        with contextlib.suppress(ValueError, OSError, AttributeError, RuntimeError):  # no usable stderr
            faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True, chain=False)
            self._dumping = True

    def close(self) -> None:
        """The command has ended: the watchdog goes, and the process's signal settings are as before."""
        if self._watchdog is None:
            return
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        if self._dumping:
            faulthandler.unregister(DUMP_SIGNAL)
        os.close(self._write_fd)  # the watchdog reads the end of the pipe, and exits
        try:
            self._watchdog.wait(timeout=_WATCHDOG_EXIT)
        except subprocess.TimeoutExpired:
            self._watchdog.kill()
            self._watchdog.wait()
        self._watchdog = None


# -- the watchdog process ---------------------------------------------------------------------------


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"aun-runtime: {text}\n".encode())


def watch(parent: int, fd: int, seconds: float) -> None:
    """The watchdog's loop: wait for a stop signal's byte on `fd`, then keep the deadline on `parent`."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    received: list[int] = []  # the stop signals so far
    due = float("inf")  # when the stacks are printed
    while os.getppid() == parent:
        wait = min(_PARENT_CHECK, max(0.0, due - time.monotonic()))
        if select.select([fd], [], [], wait)[0]:
            data = os.read(fd, 256)
            if not data:
                return  # the command has ended (or its process is gone)
            for byte in data:
                if byte in (signal.SIGINT, signal.SIGTERM):
                    received.append(byte)
                    grace = seconds if len(received) == 1 else min(seconds, SECOND_SIGNAL_GRACE)
                    due = min(due, time.monotonic() + grace - _DUMP_LEAD)
        if time.monotonic() >= due and os.getppid() == parent:
            name = signal.Signals(received[-1]).name
            why = f"{seconds:g} s after {name}" if len(received) == 1 else f"{SECOND_SIGNAL_GRACE:g} s after a second {name}"
            _say(f"still running {why}: killing it (exit 137); where each thread is:")
            os.kill(parent, DUMP_SIGNAL)
            time.sleep(_DUMP_LEAD)
            if os.getppid() == parent:
                os.kill(parent, signal.SIGKILL)
            return


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
