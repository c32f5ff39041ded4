"""The aun-runtime command.

`aun-runtime demo` runs the demo application on the embedded runtime and prints its transcript
(the demos are declared by the application package that is installed, as entry points of the group
`aun_runtime.demo`: `app` is the demo application, `gateway` the scene of `demo --gateway`; the
library names no application);
`aun-runtime run module:function` runs any application (in one of three
forms: `async def app(runtime)`, an async generator that tears down after its `yield`, or an
async context manager) on a started [`AUNRuntime`][aun_runtime.AUNRuntime], and serves it, printing
the transcript as it grows, until Ctrl-C (or `--for SECONDS`, or `--until-idle`). Applications are
loaded by import string, so the runtime never imports them. With `--console` either one serves the
web console beside the runtime until Ctrl-C; `aun-runtime console --archive FILE` watches the
archive of a runtime running elsewhere (see `aun_runtime.console`), and `aun-runtime transcript
--archive A --archive B` prints the archives of several runtimes as one transcript (`--archive
postgresql://...`: the archive the workers of several machines share; `--follow`: as it grows).
`aun-runtime dead-letters list|retry|drop --archive A` shows the open dead letters of an archive,
delivers them again through an app's agents, or gives them up (see `aun_runtime.commands._dead_letters`).

Every command stops the same way on SIGINT or SIGTERM, within a grace, and says how it ended in its
exit code (the docs' page Running and stopping says how).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points

from .api._runtime import AUNRuntime
from .base._errors import ConfigurationError
from .commands._app import App, AppRun, load_app
from .commands._console import CONSOLE, add_console_options, run_app_with_console
from .commands._dead_letters import DEAD_LETTERS
from .commands._distributed import HOST, STATUS, WORKER
from .commands._gateway import GATEWAY
from .commands._network import (
    add_client_log_option,
    add_network_options,
    network_requested,
    quiet_client_logs,
    run_on_network,
)
from .commands._table import Command, add_commands
from .operating._command_errors import CommandParser, option_values, report_errors
from .operating._logs import LOG_FORMATS, configure_logging
from .operating._metrics import ModelMetrics, RuntimeMetrics
from .operating._otel_environment import tracing_from_environment
from .operating._probes import Readiness, add_http_option, serving_probes
from .operating._stopping import STOP_GRACE, StopRequest, bound_exit, run_command
from .storage._archive import Archive
from .storage._storage_wait import open_when_available
from .transcripts._follow import TranscriptFollower, follow_archive
from .transcripts._transcript import ArchiveRoles, archive_counts

__all__ = ["DEMO_ENTRY_POINTS", "main"]

#: The entry point group in which an installed application package declares its demos.
DEMO_ENTRY_POINTS = "aun_runtime.demo"
#: Records counted for the end counters: as many as a transcript shows (`AUNRuntime.transcript`).
COUNTED_RECORDS = 10_000


async def run_app(app: App, *, archive: str, show_transcript: bool = True) -> AUNRuntime:
    """Run `app` on a fresh runtime until everything it set off has settled (`demo`, and tests):
    scheduled actions are cancelled then."""
    runtime, _ = await settle_app(_never_stopped(), app, archive=archive, show_transcript=show_transcript)
    return runtime


async def settle_app(
    stop: StopRequest, app: App, *, archive: str, show_transcript: bool = True
) -> tuple[AUNRuntime, bool]:
    """`run_app`, ended sooner by a signal; the runtime, and whether the app failed."""
    runtime = AUNRuntime(archive=archive)
    await runtime.start()
    run = AppRun(app, runtime)
    try:
        if await run.setup(stop):
            await stop.unless_stopped(runtime.stop_when_idle())
    finally:
        await runtime.stop(grace=STOP_GRACE)
    if show_transcript:
        print_summary(runtime, archive)
    runtime.archive.close()
    return runtime, run.failed


def _never_stopped() -> StopRequest:
    stop = StopRequest(serving=False)
    stop.attach(asyncio.get_running_loop())
    return stop


async def serve_app(
    stop: StopRequest, app: App, *, archive: str, seconds: float | None = None, until_idle: bool = False,
    probe_args: argparse.Namespace | None = None, connect_timeout: float | None = None,
) -> int:
    """`aun-runtime run`: run `app`, printing the transcript as it grows, until SIGINT/SIGTERM,
    for `seconds`, or (`until_idle`) until everything it set off has settled; the exit code.
    `probe_args.http`: serve the probes there; `connect_timeout`: how long to wait for the
    archive's database (None: do not wait)."""
    readiness = Readiness()
    waited_for: dict[str, str | None] = {"storage": "opening the archive"}
    readiness.require("storage", lambda: waited_for["storage"])
    async with serving_probes(probe_args or argparse.Namespace(), readiness, [ModelMetrics()]) as probes:
        # A database that does not answer within the connect timeout is reported by the one reporter.
        done, runtime = await stop.unless_stopped(open_when_available(
            lambda: AUNRuntime(archive=archive), connect_timeout, lambda why: waited_for.__setitem__("storage", why)
        ))
        if not done or runtime is None:
            return stop.exit_code(failed=False)
        if probes is not None:
            metrics = RuntimeMetrics(runtime)
            probes.add(metrics, busy=metrics.busy_report)
        return await _served(stop, app, runtime, archive, readiness, seconds=seconds, until_idle=until_idle)


async def _served(
    stop: StopRequest, app: App, runtime: AUNRuntime, archive: str, readiness: Readiness,
    *, seconds: float | None, until_idle: bool,
) -> int:
    follower = TranscriptFollower(is_agent=ArchiveRoles(runtime.archive))
    await runtime.start()
    follow = asyncio.create_task(follow_archive(runtime.archive, follower))
    run = AppRun(app, runtime)
    registered = False
    readiness.require("agents", lambda: None if registered else "the app is registering its agents")
    readiness.started()
    try:
        if await run.setup(stop):
            registered = True
            if until_idle:
                await stop.unless_stopped(runtime.stop_when_idle())
            else:
                if seconds is None:
                    print("serving; stop with Ctrl-C", flush=True)
                await stop.unless_stopped(asyncio.sleep(seconds) if seconds is not None else stop.wait())
    finally:
        try:
            await runtime.stop(grace=STOP_GRACE)
        finally:
            follow.cancel()
            await asyncio.wait({follow})
            if not follow.cancelled():
                follow.exception()  # a follower that failed failed with the archive, which is reported
    print_counters(runtime, archive)
    runtime.archive.close()
    return ended(stop, runtime, app_failed=run.failed)


def ended(stop: StopRequest, runtime: AUNRuntime, *, app_failed: bool) -> int:
    """Say in one line how a run ended, if not as it is meant to; return its exit code."""
    if stop.requested:
        print("stopped", flush=True)
        return stop.exit_code(failed=app_failed)
    if app_failed:
        print("run failed: the app raised (its traceback is above) (exit 1)", flush=True)
        return stop.exit_code(failed=True)
    return stop.exit_code(failed=failure_line(runtime) != 0)


def failure_line(runtime: AUNRuntime) -> int:
    """For a run that ended by itself: say in one line whether it failed; the exit code (0 or 1)."""
    stats = runtime.stats
    if stats.dead_letters or stats.loop_stops or stats.budget_stops:
        print(
            f"run failed: {stats.dead_letters} dead letters, {stats.loop_stops} loop stops, "
            f"{stats.budget_stops} budget stops (exit 1)",
            flush=True,
        )
        return 1
    return 0


def print_summary(runtime: AUNRuntime, archive: str) -> None:
    """Print the transcript and the counters of a run."""
    print(runtime.transcript())
    print_counters(runtime, archive)


def print_counters(runtime: AUNRuntime, archive: str) -> None:
    """Print the counters of the archive, as its transcript shows it (and where the archive is)."""
    records = runtime.archive.records(limit=COUNTED_RECORDS)
    counts = archive_counts(records)
    print(
        f"\n{counts.messages} messages · {counts.delivered} delivered · {counts.filtered} filtered (archived) · "
        f"{counts.dead_letters} dead letters · {counts.loop_stops} loop stops · "
        f"{counts.budget_stops} budget stops"
    )
    earlier = archive_counts([r for r in records if r.id <= runtime.archive_start]).messages
    if earlier:
        print(f"({earlier} of the messages are from earlier runs on this archive)")
    if archive != ":memory:":
        print(f"archive: {runtime.archive.shown}")


def _demo(name: str) -> EntryPoint:
    """The demo `name` that the installed application package declares."""
    for entry in entry_points(group=DEMO_ENTRY_POINTS, name=name):
        return entry
    raise SystemExit(
        f"error: no {name!r} demo is installed: the application package declares its demos as entry points "
        f"of the group {DEMO_ENTRY_POINTS!r} (this project's pyproject.toml does; reinstall it with "
        "`pip install -e .`)"
    )


def _run_transcript(args: argparse.Namespace) -> int:
    from .transcripts._merge import merged_transcript

    if args.follow:
        if len(args.archive) != 1:
            raise SystemExit("error: --follow follows one archive (a PostgreSQL archive holds every worker's)")
        return run_command(lambda stop: _follow_transcript(stop, args.archive[0]), serving=True)
    try:
        print(merged_transcript(args.archive))
    except (OSError, ValueError) as exc:  # no such file, or not an archive: a reader never creates one
        raise ConfigurationError(str(exc)) from exc
    return 0


async def _follow_transcript(stop: StopRequest, location: str) -> int:
    """Print the archive's transcript as it grows, until stopped."""
    try:
        archive = Archive(location, read_only=True)
    except OSError as exc:  # no such file: a reader never creates one
        raise ConfigurationError(str(exc), value=location) from exc
    follower = TranscriptFollower(is_agent=ArchiveRoles(archive))
    # A database that goes away is opened again, and the lines go on after the last one shown.
    follow = asyncio.create_task(follow_archive(archive, follower, reopen=lambda: Archive(location, read_only=True)))
    try:
        await stop.wait()
    finally:
        follow.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follow
        archive.close()
    return stop.exit_code(failed=False)


def _run_demo(args: argparse.Namespace) -> int:
    if args.gateway:
        if args.console:
            raise SystemExit("error: demo --gateway exits by itself; to watch a team on a gateway, use "
                             "`aun-runtime run agents.network:team --gateway-url URL --console`")
        quiet_client_logs(args)
        scene = _demo("gateway").load()

        async def gateway_scene(stop: StopRequest) -> int:
            done, code = await stop.unless_stopped(scene(args.archive, print_summary))
            return int(code) if done and code is not None else stop.exit_code(failed=False)

        return run_command(gateway_scene, serving=False)
    app = load_app(_demo("app").value)
    if args.console:
        return _serve_console(app, args)

    async def demo(stop: StopRequest) -> int:
        runtime, failed = await settle_app(stop, app, archive=args.archive)
        return ended(stop, runtime, app_failed=failed)

    return run_command(demo, serving=False)


def _run_app(args: argparse.Namespace) -> int:
    if (args.seconds is not None or args.until_idle) and (args.console or network_requested(args)):
        raise SystemExit("error: --for and --until-idle are for a plain run; with --console or a gateway, "
                         "run serves until Ctrl-C")
    if args.json and not network_requested(args):
        raise SystemExit("error: --json prints the gateway agent's lifecycle events as JSON lines, so it needs "
                         "--gateway-url (or AUN_GATEWAY_URL); without a gateway, run prints its transcript")
    app = load_app(args.app)
    if network_requested(args):
        return run_on_network(app, args, print_summary)
    if args.console:
        return _serve_console(app, args, live=True)
    serving = args.seconds is None and not args.until_idle
    return run_command(
        lambda stop: serve_app(
            stop, app, archive=args.archive, seconds=args.seconds, until_idle=args.until_idle,
            probe_args=args, connect_timeout=args.connect_timeout,
        ),
        serving=serving,
    )


def _serve_console(app: App, args: argparse.Namespace, *, live: bool = False) -> int:
    """Serve `app` with the console; `live` (`run`): print the transcript as it grows, as `run`
    does, and only the counters once it has settled; else (`demo`) the transcript then."""
    summary = print_counters if live else print_summary
    return run_command(lambda stop: run_app_with_console(stop, app, args, summary, live=live), serving=True)


def _demo_options(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--archive", default=":memory:",
        help="SQLite file, or postgresql://... database, for the archive (default: in memory)",
    )
    demo.add_argument(
        "--gateway", action="store_true",
        help="run the network team on a local AUN gateway, asked by a plain AUN client (exits by itself)",
    )
    add_client_log_option(demo)
    add_console_options(demo)


def _run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("app", help="e.g. agents.demo:app")
    ending = run.add_mutually_exclusive_group()
    ending.add_argument(
        "--for", dest="seconds", type=float, default=None, metavar="SECONDS",
        help="stop after SECONDS (Ctrl-C still stops it earlier)",
    )
    ending.add_argument(
        "--until-idle", action="store_true",
        help="stop once everything sent has been handled; scheduled actions are cancelled",
    )
    run.add_argument(
        "--archive", default=":memory:",
        help="SQLite file, or postgresql://... database several machines share, for the archive (default: in memory)",
    )
    run.add_argument(
        "--connect-timeout", type=float, default=30.0,
        help="seconds to wait for the archive's database at start (a postgresql:// archive)",
    )
    add_network_options(run)
    add_console_options(run)
    add_http_option(run)


def _transcript_options(transcript: argparse.ArgumentParser) -> None:
    transcript.add_argument(
        "--archive", action="append", required=True, metavar="FILE_OR_URL",
        help="an archive file, or the postgresql://... archive workers share; give it once per archive to merge",
    )
    transcript.add_argument(
        "--follow", action="store_true",
        help="keep printing new records as they are written (one archive), until Ctrl-C",
    )


DEMO = Command("demo", help="run the demo scenario and print its transcript", options=_demo_options, run=_run_demo)
RUN = Command(
    "run",
    help="run an application given as module:function; serve until Ctrl-C",
    description="Run an application (an `async def app(runtime)`, or an async generator that tears "
    "down after its `yield`, given as module:function) and print its transcript as it grows, one line "
    "per message. It serves until SIGINT/SIGTERM (exit 0, after the counters), for --for SECONDS, or "
    "with --until-idle until everything the app set off has settled (scheduled actions are cancelled "
    "then). On a signal, turns in flight get 5 s, a second signal exits at once, and the process is "
    "gone within 10 s. A run that ends by itself exits 1 if it had dead letters, loop stops or budget "
    "stops, and says so in one line; 130/143 if a signal ended it first. An app that raises has its "
    "traceback printed and exits 1.",
    options=_run_options,
    run=_run_app,
)
TRANSCRIPT = Command(
    "transcript",
    help="print the transcript of one or more archive files (read-only), merged",
    description="Print the transcript of archive files, read-only (their runtimes may still be writing "
    "them). Several --archive (the workers of a cluster, runtimes joined through gateways) are merged "
    "into one transcript by the time each record was made; a message sent in one archive and received "
    "in another is shown once, with its delivery.",
    options=_transcript_options,
    run=_run_transcript,
)
#: Every command of `aun-runtime`, in the order `--help` lists them: the one place a command is added.
COMMANDS = (DEMO, RUN, TRANSCRIPT, CONSOLE, DEAD_LETTERS, GATEWAY, HOST, WORKER, STATUS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(prog="aun-runtime", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log the runtime's lifecycle events")
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text", metavar="FORMAT",
        help="text (the default): one line per record, with its time; json: one JSON object per line",
    )
    add_commands(parser, COMMANDS)
    args = parser.parse_args(argv)

    configure_logging(logging.INFO if args.verbose else logging.WARNING, args.log_format)
    tracing = None

    def entry() -> int:
        nonlocal tracing
        tracing = tracing_from_environment(args.command)
        return int(args.run(args))

    # Every subcommand names its own entry point: one way to dispatch, and to report what stops it.
    try:
        code = report_errors(entry, debug=args.debug, options=option_values(args))
    finally:
        if tracing is not None:
            tracing.close()  # the spans still in the batch leave now
    if argv is None:  # the command is the program: nothing the app left running may hold its exit
        bound_exit(code)
    return code

if __name__ == "__main__":
    raise SystemExit(main())
