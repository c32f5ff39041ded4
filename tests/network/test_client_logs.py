"""The AUN client's own stderr lines are held to warnings by default (errors only from its agent.md
store), whichever logger it makes, and ``--client-log-level`` / ``AUN_CLIENT_LOG_LEVEL`` sets one
level for all of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aun_runtime.cli import main
from aun_runtime.network._client_logs import CLIENT_LOG_ENV, client_log_level, set_client_log_level

aun_logger = pytest.importorskip("aun_core.logger")


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    set_client_log_level("debug")  # the floor no longer holds anything back


def _say_everything() -> None:
    log = aun_logger.AUNLogger(debug=True)  # made after the level was set, as the client does
    log.info("client", "connected: aid=%s", "a.local")
    log.warn("client", "reconnecting")
    log.warn("agent_md", "agent.md content read failed: aid=%s", "a.local")
    log.error("client", "gave up")


def test_by_default_only_warnings_and_errors_and_no_agent_md_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    set_client_log_level(None)
    _say_everything()
    err = capsys.readouterr().err
    assert "[WARN][client]" in err and "[ERROR][client]" in err
    assert "[INFO]" not in err and "agent_md" not in err


def test_an_explicit_level_applies_to_every_module(capsys: pytest.CaptureFixture[str]) -> None:
    set_client_log_level("info")
    _say_everything()
    err = capsys.readouterr().err
    assert "[INFO][client]" in err and "[WARN][agent_md]" in err


def test_the_level_comes_from_the_option_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLIENT_LOG_ENV, "DEBUG")
    assert client_log_level(None) == "debug"
    assert client_log_level("error") == "error"
    monkeypatch.setenv(CLIENT_LOG_ENV, "loud")
    with pytest.raises(SystemExit, match="client log level"):
        client_log_level(None)


def test_run_and_demo_document_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "demo"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--client-log-level" in capsys.readouterr().out
