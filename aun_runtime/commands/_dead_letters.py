"""`aun-runtime dead-letters list|retry|drop`: the open dead letters of an archive, and what to do with them.

* `list` prints the open dead letters (not yet redriven or dropped), one line each: record id,
  time, AID, the message, the reason. By default only those marked retryable; `--all` every one.
* `retry --app module:function` runs the application on the archive (it registers the agents the
  dead letters belong to), delivers each chosen dead letter again
  ([`AUNRuntime.redrive`][aun_runtime.AUNRuntime.redrive]), and stops once everything has settled.
* `drop` records each chosen dead letter as `dropped`: given up on, by hand; `list` shows it no more.

Each takes `--archive` (a SQLite file or a `postgresql://` URL) and the filters `--aid`, `--cause`
(text in the reason), `--since` and `--until` (an ISO 8601 time, UTC unless it says otherwise, or a
duration ago: `90s`, `15m`, `2h`, `1d`).
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta

from ..api._redrive import DeadLetterFilter, close_dead_letter, open_dead_letters
from ..api._runtime import AUNRuntime
from ..operating._stopping import STOP_GRACE, StopRequest, run_command
from ..storage._archive import Archive, ArchiveRecord, RecordKind
from ..transcripts._transcript import snip
from ._app import AppRun, load_app
from ._table import Command

__all__ = ["DEAD_LETTERS"]

_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _when(text: str) -> datetime:
    found = _AGO.match(text.strip())
    if found:
        return datetime.now(UTC) - timedelta(seconds=float(found.group(1)) * _UNIT[found.group(2)])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO 8601 time (2026-12-03T16:00) nor a duration ago (90s, 15m, 2h, 1d)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _filter(args: argparse.Namespace) -> DeadLetterFilter:
    return DeadLetterFilter(args.aid, args.cause, args.since, args.until, retryable_only=not args.all)


def _line(record: ArchiveRecord) -> str:
    at = datetime.fromtimestamp(record.recorded_at / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    message = record.message
    what = f"{message.from_aid}: {snip(message.text or message.payload.type)!r}" if message is not None else "-"
    return f"#{record.id}  {at}  {record.owner}  <- {what}  {record.reason}"


def _open(location: str, *, read_only: bool) -> Archive:
    if location.startswith("postgresql://"):
        return Archive(location)
    try:
        return Archive(location, read_only=read_only)
    except FileNotFoundError:
        raise SystemExit(f"error: no archive at {location}") from None


def _list(args: argparse.Namespace) -> int:
    archive = _open(args.archive, read_only=True)
    try:
        found = open_dead_letters(archive, _filter(args))
    finally:
        archive.close()
    for record in found:
        print(_line(record))
    print(f"{len(found)} open dead letter{'' if len(found) == 1 else 's'}")
    return 0


def _drop(args: argparse.Namespace) -> int:
    archive = _open(args.archive, read_only=False)
    try:
        found = open_dead_letters(archive, _filter(args))
        for record in found:
            close_dead_letter(archive, record, RecordKind.DROPPED)
            print("dropped " + _line(record))
    finally:
        archive.close()
    print(f"{len(found)} dead letter{'' if len(found) == 1 else 's'} dropped")
    return 0


def _retry(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    which = _filter(args)

    async def redrive(stop: StopRequest) -> int:
        runtime = AUNRuntime(archive=args.archive)
        await runtime.start()
        run = AppRun(app, runtime)
        redriven: list[ArchiveRecord] = []
        newest = max((r.id for r in runtime.archive.dead_letters(limit=1)), default=0)
        try:
            if await run.setup(stop):
                for record in open_dead_letters(runtime.archive, which):
                    if not runtime.is_agent(record.owner):
                        print(f"not redriven (the app registers no agent {record.owner}): " + _line(record))
                redriven = await runtime.redrive(aid=which.aid, cause=which.cause, since=which.since, until=which.until)
                for record in redriven:
                    print("redriven " + _line(record))
                await stop.unless_stopped(runtime.stop_when_idle())
        finally:
            await runtime.stop(grace=STOP_GRACE)
        again = [r for r in runtime.archive.dead_letters() if r.id > newest]
        runtime.archive.close()
        print(f"{len(redriven)} dead letter{'' if len(redriven) == 1 else 's'} redriven, {len(again)} new")
        return 1 if run.failed or again else 0

    return run_command(redrive, serving=False)


def _filter_options(action: argparse.ArgumentParser) -> None:
    """The options every action takes: the archive, and which dead letters."""
    action.add_argument("--archive", required=True, metavar="FILE_OR_URL",
                        help="the archive: a SQLite file or a postgresql://... database")
    action.add_argument("--aid", help="only the dead letters of this AID")
    action.add_argument("--cause", help="only those whose reason contains this text (e.g. ModelUnavailableError)")
    action.add_argument("--since", type=_when, help="only those recorded since (ISO 8601 time, or 15m, 2h ago)")
    action.add_argument("--until", type=_when, help="only those recorded before this time")
    action.add_argument("--all", action="store_true", help="not only those marked retryable")


def _retry_options(action: argparse.ArgumentParser) -> None:
    _filter_options(action)
    action.add_argument("--app", required=True, help="module:function that registers the agents (e.g. myapp:agents)")


def _no_options(parser: argparse.ArgumentParser) -> None:
    """`dead-letters` itself takes none: its actions do."""


DEAD_LETTERS = Command(
    "dead-letters",
    help="list, retry (redrive) or drop the open dead letters of an archive",
    description=__doc__.split("\n\n")[1] if __doc__ else None,
    options=_no_options,
    actions=(
        Command("list", help="print the open dead letters", options=_filter_options, run=_list),
        Command("retry", help="run an app on the archive and deliver the dead letters again",
                options=_retry_options, run=_retry),
        Command("drop", help="record the dead letters as given up on", options=_filter_options, run=_drop),
    ),
)
