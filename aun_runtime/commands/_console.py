"""The console's command line: `aun-runtime console` and the `--console` option of `demo`/`run`.

* `aun-runtime console --archive path.sqlite` watches an archive that another process writes
  (read-only), until Ctrl-C; `--archive postgresql://...` watches the archive that the workers of
  several machines share.
* `aun-runtime demo --console` (or `run APP --console`) runs the application with a console
  next to it, prints the transcript and the console's URL, and keeps serving until Ctrl-C. Add
  `--allow-send` to send as an agent from the page.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

from ..api._runtime import AUNRuntime
from ..console._console import DEFAULT_HOST, Console
from ..console._feed import DEFAULT_POLL_INTERVAL
from ..operating._command_errors import port_number
from ..operating._metrics import ModelMetrics, RuntimeMetrics
from ..operating._probes import serving_probes
from ..operating._stopping import STOP_GRACE, StopRequest, run_command
from ..storage import dialect_for
from ..storage._archive import Archive
from ..transcripts._follow import TranscriptFollower, follow_archive, print_new
from ..transcripts._transcript import ArchiveRoles
from ._app import App, AppRun
from ._table import Command

__all__ = [
    "CONSOLE",
    "DEFAULT_PORT",
    "add_console_options",
    "run_app_with_console",
    "run_console",
]

#: The console's port when none is given (0 picks any free port).
DEFAULT_PORT = 8780


def _add_listen_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address the console listens on (default: {DEFAULT_HOST}, this machine only)",
    )
    parser.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        help=f"the console's port (default: {DEFAULT_PORT}; 0: any free port)",
    )


def add_console_options(parser: argparse.ArgumentParser) -> None:
    """`--console` and friends, for commands that run an application."""
    parser.add_argument(
        "--console",
        action="store_true",
        help="serve the console next to the runtime; keep serving until Ctrl-C",
    )
    parser.add_argument(
        "--allow-send", action="store_true", help="with --console: let the page send as a local agent"
    )
    _add_listen_options(parser)


def _console_options(console: argparse.ArgumentParser) -> None:
    console.add_argument(
        "--archive",
        required=True,
        help="the runtime's SQLite archive file, or the postgresql://... database that workers share",
    )
    console.add_argument(
        "--poll-interval",
        type=float,
        default=DEFAULT_POLL_INTERVAL,
        help=f"seconds between two looks at the archive (default: {DEFAULT_POLL_INTERVAL})",
    )
    console.add_argument(
        "--allow-send",
        action="store_true",
        help="refused here: sending needs the runtime in this process (use demo/run --console --allow-send)",
    )
    _add_listen_options(console)


def run_console(args: argparse.Namespace) -> int:
    """Run `aun-runtime console`."""
    if args.allow_send:
        raise SystemExit(
            "error: --allow-send needs the runtime in this process; a console on an archive file can only "
            "watch. Use `aun-runtime demo --console --allow-send` or `aun-runtime run APP --console --allow-send`."
        )
    _refuse_what_never_appears(args.archive)
    console = Console(args.archive, host=args.host, port=args.port, poll_interval=args.poll_interval)
    return run_command(lambda stop: _serve_archive(stop, console), serving=True)


def _refuse_what_never_appears(location: str) -> None:
    """A reader never creates: a PostgreSQL database that does not exist (or refuses this URL, or
    holds tables that are not the runtime's) is refused at start, since no runtime will ever make it
    readable. An SQLite file not there yet is waited for: the runtime that writes it makes it."""
    if dialect_for(location).shared:  # a server's database is not made by the runtime that writes it
        Archive(location, read_only=True).close()  # StorageUnavailableError: exit 2, nothing touched


async def _serve_archive(stop: StopRequest, console: Console) -> int:
    url = await _start(console)
    print(f"console: {url}  ({console.source}; Ctrl-C stops it)", flush=True)
    try:
        await stop.wait()
    finally:
        await console.stop()
    print("console stopped", flush=True)
    return stop.exit_code(failed=False)


async def run_app_with_console(
    stop: StopRequest,
    app: App,
    args: argparse.Namespace,
    summary: Callable[[AUNRuntime, str], None],
    *,
    live: bool = False,
) -> int:
    """Run `app` with a console beside it; keep serving (and the runtime running) until stopped.

    Args:
        stop: the command's stop request (a signal ends the serving).
        app: the application.
        args: the parsed command line (`archive`, `host`, `port`, `allow_send`).
        summary: prints the transcript and counters once the application has settled.
        live: print the transcript as it grows, one line per message, as `run` does (then
            `summary` need only print the counters).

    Returns:
        The exit code (see `aun_runtime.operating._stopping`).
    """
    runtime = AUNRuntime(archive=args.archive)
    await runtime.start()
    follow = None
    follower = TranscriptFollower(is_agent=ArchiveRoles(runtime.archive))
    if live:
        follow = asyncio.create_task(follow_archive(runtime.archive, follower))
    console = Console(runtime, host=args.host, port=args.port, allow_send=args.allow_send)
    run = AppRun(app, runtime)
    settled = False
    probes = serving_probes(args, console.readiness, [ModelMetrics(), RuntimeMetrics(runtime)])
    try:
        await probes.__aenter__()  # `--http`: the probes on a port of their own too
        url = await _start(console)
        print(f"console: {url}", flush=True)
        if await run.setup(stop):
            settled, _ = await stop.unless_stopped(runtime.settle())
            if settled:
                if live:
                    print_new(runtime.archive, follower)  # every line so far, before the counters
                summary(runtime, args.archive)
                sending = "sending enabled" if args.allow_send else "read-only"
                print(f"\nconsole: {url}  ({sending}; serving until Ctrl-C)", flush=True)
                await stop.wait()
    finally:
        await probes.__aexit__(None, None, None)
        await console.stop()
        await runtime.stop(grace=STOP_GRACE)
        if follow is not None:
            follow.cancel()
            await asyncio.wait({follow})
        if not settled and not run.failed:  # stopped before it settled: the summary, with what the stop recorded
            summary(runtime, args.archive)
        runtime.archive.close()
    print("console stopped", flush=True)
    return stop.exit_code(failed=run.failed)


async def _start(console: Console) -> str:
    try:
        return await console.start()
    except OSError as exc:
        raise SystemExit(
            f"error: the console cannot listen on {console.host}:{console.port}: {exc.strerror or exc}. "
            "Pick another --port (0: any free port)."
        ) from None


#: `aun-runtime console`.
CONSOLE = Command(
    "console",
    help="serve the console for an archive file that a running runtime writes (read-only)",
    options=_console_options,
    run=run_console,
)
