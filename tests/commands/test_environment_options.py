"""Every option is also an `AUN_*` variable: a flag wins, --help names the variable, a bad value
is refused in one line naming the variable (exit 2)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from aun_runtime.cli import main


def parsed(argv: list[str], monkeypatch: pytest.MonkeyPatch, **env: str) -> object:
    """The namespace `aun-runtime argv` is parsed into, with `env` set (nothing is run)."""
    seen: list[object] = []
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    import aun_runtime.cli as cli

    def capture(self: cli.CommandParser, args: list[str] | None = None, namespace: object = None) -> object:
        result = argparse.ArgumentParser.parse_args(self, args)
        seen.append(result)
        raise SystemExit(0)

    monkeypatch.setattr(cli.CommandParser, "parse_args", capture)
    with pytest.raises(SystemExit):
        main(argv)
    return seen[0]


def test_every_kind_of_option_takes_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    args = parsed(
        ["worker"], monkeypatch,
        AUN_HOST="10.0.0.5:50051", AUN_APP="agents.demo:app", AUN_CONNECT_TIMEOUT="7.5",
        AUN_SERVICE="a.local,b.local=sender_affinity", AUN_HTTP=":9090", AUN_LOG_FORMAT="json",
    )
    assert vars(args).items() >= {
        "host": "10.0.0.5:50051", "app": "agents.demo:app", "connect_timeout": 7.5,
        "service": ["a.local", "b.local=sender_affinity"], "http": ":9090", "log_format": "json",
    }.items()


def test_a_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    args = parsed(["worker", "--app", "x:y", "--connect-timeout", "3"], monkeypatch, AUN_APP="agents.demo:app",
                  AUN_CONNECT_TIMEOUT="9")
    assert (vars(args)["app"], vars(args)["connect_timeout"]) == ("x:y", 3.0)


def test_switches_and_the_positional_app_of_run(monkeypatch: pytest.MonkeyPatch) -> None:
    args = parsed(["run"], monkeypatch, AUN_APP="agents.demo:app", AUN_UNTIL_IDLE="yes")
    assert (vars(args)["app"], vars(args)["until_idle"]) == ("agents.demo:app", True)
    args = parsed(["run", "x:y"], monkeypatch, AUN_UNTIL_IDLE="0")
    assert (vars(args)["app"], vars(args)["until_idle"]) == ("x:y", False)


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "aun_runtime", *argv], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


def test_a_bad_value_is_one_line_naming_the_variable_and_exit_2() -> None:
    done = _cli("worker", "--app", "x:y", env={"AUN_CONNECT_TIMEOUT": "soon"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: AUN_CONNECT_TIMEOUT='soon' is not a valid value for --connect-timeout"]
    done = _cli("run", "x:y", env={"AUN_LOG_FORMAT": "xml"})
    assert done.returncode == 2 and "AUN_LOG_FORMAT" in done.stderr and "json" in done.stderr


def test_help_names_each_variable() -> None:
    done = _cli("worker", "--help", env={})
    text = " ".join(done.stdout.split())
    for variable in ("AUN_HOST", "AUN_APP", "AUN_ARCHIVE", "AUN_NAME", "AUN_CONNECT_TIMEOUT", "AUN_HTTP"):
        assert f"[env {variable}]" in text


def test_an_empty_variable_is_unset_and_a_choice_is_read_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    args = parsed(["worker"], monkeypatch, AUN_APP="x:y", AUN_NAME="", AUN_LOG_FORMAT="JSON", AUN_CONNECT_TIMEOUT="")
    assert (vars(args)["name"], vars(args)["log_format"], vars(args)["connect_timeout"]) == (None, "json", 30.0)


def test_a_value_one_command_refuses_stops_only_that_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # One variable may stand for options of several commands: AUN_HOST is the console's address to
    # serve on and the worker's host:port. A value the worker's option refuses leaves the console be.
    args = parsed(["console", "--archive", "run.sqlite"], monkeypatch, AUN_HOST="127.0.0.1")
    assert vars(args)["host"] == "127.0.0.1"
    done = _cli("worker", "--app", "x:y", env={"AUN_HOST": "127.0.0.1"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: AUN_HOST='127.0.0.1' is not a valid value for --host"
    ]
