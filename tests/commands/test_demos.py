"""The demos come from the installed application package (entry points), never from the library."""

from __future__ import annotations

import inspect
import re
from importlib.metadata import entry_points

import pytest

from aun_runtime import cli


def test_the_installed_package_declares_both_demos_and_they_load() -> None:
    declared = {entry.name: entry for entry in entry_points(group=cli.DEMO_ENTRY_POINTS)}
    assert set(declared) == {"app", "gateway"}
    assert inspect.iscoroutinefunction(declared["app"].load())
    assert inspect.iscoroutinefunction(declared["gateway"].load())


def test_a_missing_demo_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # As on a machine where only the library is installed: nothing declares a demo.
    monkeypatch.setattr(cli, "entry_points", lambda **_: ())
    assert cli.main(["demo"]) == 2  # a configuration error, as argparse's usage errors
    assert re.search(r"no .app. demo is installed.*aun_runtime\.demo", capsys.readouterr().err)
