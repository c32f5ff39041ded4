"""Every option of the command line is also an environment variable: `--foo-bar` is `AUN_FOO_BAR`.

A container, a compose file or a Kubernetes manifest configures a process by its environment, so
each option of every command reads its default from `AUN_<OPTION>` (the long option's name, upper
case, `-` as `_`): `AUN_HOST`, `AUN_APP`, `AUN_ARCHIVE`, `AUN_NAME`, `AUN_CONNECT_TIMEOUT`, ...
An option given on the command line wins over its variable. A switch (`--until-idle`) is on for
`1`, `true`, `yes` or `on` and off for `0`, `false`, `no`, `off` or empty; an option given
several times (`--service`, `--expose`) takes a comma-separated list; the positional application
of `run` is `AUN_APP`; a variable set to nothing counts as unset. Each option's `--help` names its
variable.

It is applied once, where the parser is built (`EnvironmentParser.environment_defaults`), so no command spells out
its own variables. A value the option would refuse (not a number, not one of its choices) is
refused the same way, naming the variable.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from ._stopping import ExitCode

__all__ = ["ENV_PREFIX", "EnvironmentParser", "variable_of"]

#: The prefix of every variable that stands for an option.
ENV_PREFIX = "AUN_"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
# Options that are not configuration: asking for help or the version is never done by environment.
_NOT_CONFIGURATION = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def variable_of(action: argparse.Action) -> str:
    """The environment variable that stands for `action`: its first long option, else its name."""
    longs = [option for option in action.option_strings if option.startswith("--")]
    name = longs[0][2:] if longs else action.dest
    return ENV_PREFIX + name.upper().replace("-", "_")


class EnvironmentParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose options (its subcommands' too) can take defaults from `AUN_*`
    variables: call `environment_defaults` once every subcommand is added, before parsing."""

    #: What the variables of this parser's own options held that they refuse: said only when this
    #: parser is used, since one variable may stand for options of several commands (`AUN_HOST`:
    #: the console's address to serve on, the worker's host:port).
    _refused_variables: tuple[str, ...] = ()

    def environment_defaults(self, environ: Mapping[str, str] | None = None) -> None:
        """Give every option of this parser and of all its subcommands a default from its `AUN_*`
        variable (if set), and name the variable in its help. A value an option refuses is
        refused (one line, exit 2, naming the variable) when its command is parsed."""
        env = os.environ if environ is None else environ
        refused: list[str] = []
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):  # aliases name one parser twice
                    if isinstance(sub, EnvironmentParser):
                        sub.environment_defaults(env)
                continue
            if isinstance(action, _NOT_CONFIGURATION) or action.help == argparse.SUPPRESS:
                continue
            if not action.option_strings and action.nargs is not None:
                continue  # a positional list: not one value a variable can hold
            variable = variable_of(action)
            action.help = f"{action.help or ''} [env {variable}]".strip()
            if variable in env:
                try:
                    _take_default(action, variable, env[variable])
                except SystemExit as exc:
                    refused.append(str(exc.code))
        self._refused_variables = tuple(refused)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self._refused_variables:
            self.exit(ExitCode.USAGE, self._refused_variables[0] + "\n")
        return super().parse_known_args(args, namespace)


def _take_default(action: argparse.Action, variable: str, text: str) -> None:
    if not text.strip():
        return  # set and empty: as if unset (a compose file's `AUN_NAME=` with no value)
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        value = text.strip().lower()
        if value not in _TRUE | _FALSE:
            raise SystemExit(f"error: {variable}={text!r}: a switch is 1/true/yes/on or 0/false/no/off")
        on = value in _TRUE
        action.default = on if isinstance(action, argparse._StoreTrueAction) else not on
        return
    if isinstance(action, argparse._AppendAction):
        action.default = [part.strip() for part in text.split(",") if part.strip()]
    else:
        try:
            action.default = action.type(text) if callable(action.type) else text
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            raise SystemExit(f"error: {variable}={text!r} is not a valid value for {action.option_strings[0]}") from None
    if isinstance(action.default, str) and action.choices is not None and action.default.lower() in action.choices:
        action.default = action.default.lower()  # JSON or json, as a person writes it
    if action.choices is not None and action.default not in action.choices and not isinstance(action.default, list):
        choices = ", ".join(map(str, action.choices))
        raise SystemExit(f"error: {variable}={text!r}: choose one of {choices}")
    if not action.option_strings:
        action.nargs = "?"  # the positional may now be left out: its variable stands for it
    action.required = False
