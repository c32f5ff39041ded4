"""Stopping a long-running command on Ctrl-C or SIGTERM, the same way for every command."""

from __future__ import annotations

import asyncio
import contextlib
import signal

__all__ = ["stop_on_signal"]


def stop_on_signal() -> asyncio.Event:
    """An event that SIGINT (Ctrl-C) and SIGTERM set, in the running loop.

    Both signals get a handler of their own: a process started with `&` by a non-interactive shell
    inherits SIGINT ignored, and would otherwise never hear Ctrl-C's signal.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on some platforms
            loop.add_signal_handler(signum, stop.set)
    return stop
