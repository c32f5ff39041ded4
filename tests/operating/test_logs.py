"""The two log formats: a UTC timestamp first on every text line; one JSON object per record, a
traceback inside it (the AID and message ids of a turn's lines: tests/distributed/test_json_logs.py)."""

from __future__ import annotations

import json
import logging
import re

from aun_runtime.operating._logs import JsonFormatter, TextFormatter

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def record(message: str, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("broken")
        except ValueError as error:
            info = (type(error), error, error.__traceback__)
    return logging.LogRecord("team", logging.WARNING, __file__, 1, message, (), info)


def test_a_text_line_starts_with_its_time() -> None:
    line = TextFormatter().format(record("hello"))
    assert STAMP.match(line) and line.endswith(" WARNING team: hello")


def test_a_json_line_is_one_object_with_its_traceback_inside() -> None:
    text = JsonFormatter().format(record("it failed", exc=True))
    assert "\n" not in text
    fields = json.loads(text)
    assert fields["level"] == "WARNING" and fields["logger"] == "team" and fields["message"] == "it failed"
    assert "ValueError: broken" in fields["exception"] and fields["time"].endswith("Z")


def test_a_root_logger_someone_else_set_up_is_left_alone() -> None:
    from aun_runtime.operating._logs import configure_logging

    root = logging.getLogger()
    foreign = logging.NullHandler()
    root.addHandler(foreign)
    before = list(root.handlers), root.level
    try:
        configure_logging(logging.INFO, "json")
        assert (list(root.handlers), root.level) == before
    finally:
        root.removeHandler(foreign)


def test_a_command_that_refuses_its_configuration_says_so_as_a_json_line(tmp_path: object) -> None:
    # Under --log-format json every line on stderr is parsed by a collector: the one line of a
    # configuration error is a JSON log line too, with its level.
    import subprocess
    import sys
    from pathlib import Path

    state = Path(str(tmp_path)) / "a-directory"
    state.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "aun_runtime", "--log-format", "json", "host", "--address", "127.0.0.1:0",
         "--state", str(state)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    said = json.loads(line)
    assert said["level"] == "ERROR" and said["message"].startswith("error: --state: ")
