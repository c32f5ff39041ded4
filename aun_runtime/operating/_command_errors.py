"""What a command says when something stops it: one line for what a person can fix, a traceback
only for a bug.

Every `aun-runtime` command runs its entry through `report_errors`, so the same kind of failure
reads and exits the same way in each:

| what stopped it | exit | on stderr |
|---|---|---|
| a configuration error: a [`ConfigurationError`][aun_runtime.ConfigurationError] (a database that refuses the connection or is not the runtime's, a state file that is no regular file, an address that cannot be served), or a usage error that says what to do (an app that cannot be loaded, options that do not go together) | 2 | one line: `error: --setting: what is wrong: what to do` |
| a runtime failure: any other `AUNError` (the database lost mid-run, a host that does not answer) | 1 | one line: `error: what happened` |
| anything else: a bug | 1 | its traceback |

`--debug` (on every command) shows the traceback of the first two as well. A password in a URL is
shown as `***` in every line, whatever raised it.
"""

from __future__ import annotations

import argparse
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from protocols.errors import AUNError

from ..base._errors import ConfigurationError
from ..storage._postgres import redacted_url
from ._env_options import EnvironmentParser
from ._stopping import ExitCode, json_line, saying_json

__all__ = ["CommandParser", "add_debug_option", "address", "option_values", "port_number", "report_errors", "shown_line"]

#: The ports a socket can have (0: any free one, where a command allows it).
PORTS = range(0, 65536)

# `scheme://user:password@`: the password part, wherever a URL appears in a message.
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:)(?P<password>[^\s@/]+)@")


def shown_line(text: str) -> str:
    """`text` as one line, with the password of any URL in it shown as `***`.

    Example:
        >>> shown_line("cannot open postgresql://app:hunter2@db:5432/aun:\\n  connection refused")
        'cannot open postgresql://app:***@db:5432/aun: connection refused'
    """
    line = " ".join(part.strip() for part in text.splitlines() if part.strip())
    return _URL_PASSWORD.sub(lambda match: f"{match['head']}***@", line)


class CommandParser(EnvironmentParser):
    """An argument parser whose usage errors are one line too: what is wrong, and where the help is
    (argparse's own prints the whole usage first), and whose options also read `AUN_*` variables
    (`environment_defaults`). Its subcommands' parsers are of its class."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"error: {message} (see {self.prog} --help)\n")


def port_number(text: str) -> int:
    """An argparse type: a port, 0 to 65535 (a socket library would take 99999 as 34463)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)") from None
    if port not in PORTS:
        raise argparse.ArgumentTypeError(f"{port} is not a port number: give 0 to 65535 (0: any free port)")
    return port


def address(text: str) -> str:
    """An argparse type: `host:port`, with a port from 0 to 65535."""
    host, colon, port = text.rpartition(":")
    if not colon or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not host:port (for example 127.0.0.1:50051)")
    port_number(port)
    return text


def add_debug_option(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """`--debug`: show the traceback of configuration errors and runtime failures too.

    Given on the program and on each subcommand (`aun-runtime --debug run ...` and `aun-runtime
    run ... --debug` alike): a subcommand's leaves the program's value alone when it is not given.
    """
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if subcommand else False,
        help="show the traceback of a configuration error or runtime failure, not only its line",
    )


def option_values(args: argparse.Namespace) -> dict[str, Sequence[object]]:
    """The options a command was given, by option name (`--archive`), each with its values as a
    list: what `report_errors` looks in to name the setting an error is about."""
    values: dict[str, Sequence[object]] = {}
    for dest, value in vars(args).items():
        if value is None or callable(value) or isinstance(value, bool):
            continue
        values[f"--{dest.replace('_', '-')}"] = value if isinstance(value, list) else [value]
    return values


def _setting(error: ConfigurationError, options: Mapping[str, Sequence[object]]) -> str:
    """`--option: ` for the option whose value the error is about, or nothing if none is."""
    if error.value is None:
        return ""
    for option, values in options.items():
        if any(redacted_url(str(value)) == error.value for value in values):
            return f"{option}: "
    return ""


def _say(line: str, error: BaseException | None, debug: bool) -> None:
    if debug and error is not None:
        traceback.print_exception(error, file=sys.stderr)
    line = shown_line(line)
    # Under --log-format json the one line is a log line too: a collector parses every line.
    print(json_line(line, "ERROR") if saying_json() else line, file=sys.stderr, flush=True)


def report_errors(
    entry: Callable[[], int], *, debug: bool = False, options: Mapping[str, Sequence[object]] | None = None
) -> int:
    """Run a command's `entry` and return its exit code, reporting what stopped it as the module says.

    Args:
        entry: the command; returns its exit code.
        debug: show tracebacks of configuration errors and runtime failures too.
        options: the command's options and their values (`option_values`), to name the one a
            configuration error is about.
    """
    try:
        return int(entry())
    except SystemExit as exc:
        if not isinstance(exc.code, str):
            raise
        _say(exc.code, exc, debug)  # a usage error that says what to do, as argparse's
        return ExitCode.USAGE
    except ConfigurationError as exc:
        _say(f"error: {_setting(exc, options or {})}{exc}", exc, debug)
        return ExitCode.USAGE
    except AUNError as exc:
        _say(f"error: {exc}", exc, debug)
        return ExitCode.FAILED
    except Exception as exc:  # a bug: everything that could help find it
        traceback.print_exception(exc, file=sys.stderr)
        _say(f"error: an unexpected {type(exc).__name__} (a bug; its traceback is above): {exc}", None, False)
        return ExitCode.FAILED
