"""How a command of `aun-runtime` is registered: one `Command` each, listed in one table.

A command is its name, its help, a function that adds its options and the entry that runs it;
`aun_runtime.cli` lists every command in one table (`COMMANDS`) and builds the parser from it
with `add_commands`, so no module adds parsers of its own. A command with actions of its own
(`dead-letters list|retry|drop`) lists them as commands too.

An option several commands take is added by one named function, which each of those commands'
`options` calls (`add_console_options`, `add_network_options`, `add_client_log_option`,
`add_http_option`). What every command takes is added here, once: `--debug`, and an `AUN_*`
variable for each option (`aun_runtime.operating._env_options`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..operating._command_errors import CommandParser, add_debug_option

__all__ = ["Command", "add_commands"]


@dataclass(frozen=True)
class Command:
    """One command (or one action of a command) of `aun-runtime`.

    Args:
        name: what is typed (`run`, `dead-letters`, `list`).
        help: one line, shown in the list of commands.
        options: adds the command's options and arguments to its parser.
        run: the entry: runs the parsed command and returns its exit code (None: one of
            `actions` is chosen, and runs).
        description: shown at the top of the command's own `--help` (None: none).
        actions: the command's own subcommands, chosen by the next word (`dead-letters list`).
    """

    name: str
    help: str
    options: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int] | None = None
    description: str | None = None
    actions: Sequence[Command] = ()


def _add(chooser: argparse._SubParsersAction[Any], command: Command) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = chooser.add_parser(command.name, help=command.help, description=command.description)
    command.options(parser)
    if command.actions:
        actions = parser.add_subparsers(dest="action", required=True)
        for action in command.actions:
            _add(actions, action)
    if command.run is not None:
        parser.set_defaults(run=command.run)
    return parser


def add_commands(parser: CommandParser, commands: Sequence[Command]) -> None:
    """Add one subcommand per command to the program's `parser` (which has its own options already).

    Every option then reads its default from its `AUN_*` variable; `--debug` is taken on the
    program and on each command (`aun-runtime --debug run ...` and `aun-runtime run ... --debug`
    alike).
    """
    chooser = parser.add_subparsers(dest="command", required=True)
    parsers = [_add(chooser, command) for command in commands]
    add_debug_option(parser)  # before the variables: AUN_DEBUG=1 is --debug
    parser.environment_defaults()
    for command in parsers:  # after them: a subcommand's --debug only when given
        add_debug_option(command, subcommand=True)
