"""One way to register a command: every command of `aun-runtime` is a `Command` in the table
`COMMANDS`, the parser is built from that table in one place, and `aun-runtime` (`python -m
aun_runtime`) is the one entry point.

Read from the source with ``ast`` where the rule is about where code is, and from the parser where
it is about what the command line offers.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from aun_runtime.cli import COMMANDS
from aun_runtime.commands._table import Command, add_commands
from aun_runtime.operating._command_errors import CommandParser

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "aun_runtime"
#: The one module that adds parsers for commands (`add_parser`, `add_subparsers`).
BUILDER = LIBRARY / "commands" / "_table.py"


def _calls(path: Path, names: set[str]) -> list[int]:
    """The lines of `path` that call a method or function named in `names`."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in names:
                lines.append(node.lineno)
    return lines


def test_only_the_command_table_builder_adds_command_parsers() -> None:
    # A module that added a subcommand itself would be a second way to register one.
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in LIBRARY.rglob("*.py")
        if path != BUILDER
        for line in _calls(path, {"add_parser", "add_subparsers"})
    }
    assert found == set()
    assert _calls(BUILDER, {"add_parser"}) and _calls(BUILDER, {"add_subparsers"})


def test_aun_runtime_is_the_one_entry_point() -> None:
    programs = sorted(str(path.relative_to(ROOT)) for path in LIBRARY.rglob("__main__.py"))
    assert programs == ["aun_runtime/__main__.py"]


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [chooser] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(chooser.choices)


def test_the_command_line_offers_exactly_the_commands_of_the_table() -> None:
    parser = CommandParser(prog="aun-runtime")
    add_commands(parser, COMMANDS)
    commands = _choices(parser)
    assert list(commands) == [command.name for command in COMMANDS]
    assert list(commands) == [
        "demo", "run", "transcript", "console", "dead-letters", "gateway", "host", "worker", "status",
    ]
    for command in COMMANDS:  # each runs its own entry, or one of its actions does
        assert command.run is not None or command.actions, command.name
    actions = _choices(commands["dead-letters"])
    assert list(actions) == ["list", "retry", "drop"]


def test_a_command_added_to_a_table_takes_debug_and_its_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # What every command takes is added by the builder, not by each command.
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--colour", default="blue")

    parser = CommandParser(prog="prog")
    monkeypatch.setenv("AUN_COLOUR", "green")
    add_commands(parser, [Command("paint", help="paint", options=options, run=lambda args: 0)])
    args = parser.parse_args(["paint", "--debug"])
    assert (args.colour, args.debug, args.command) == ("green", True, "paint")
    assert args.run(args) == 0
    assert parser.parse_args(["--debug", "paint"]).debug is True
