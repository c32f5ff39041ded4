"""How every command logs: a timestamp on every line, and one JSON object per line on request.

`--log-format text` (the default) writes `2026-12-03T16:05:01.123Z WARNING aun_runtime: ...`;
`--log-format json` (or `AUN_LOG_FORMAT=json`) writes one object per line with `time`, `level`,
`logger` and `message`, plus `aid`, `thread_id` and `message_id` when the line is logged inside an
agent's turn (the agent acting and the message it handles), and `exception` with the traceback.
Python's warnings are logged too (logger `py.warnings`), so they take the same form, and so do the
lines a command says on stderr as it stops (see `aun_runtime.operating._stopping`).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from ..delivery._acting import ACTING, INBOUND
from ._stopping import say_as_json

__all__ = ["LOG_FORMATS", "JsonFormatter", "TextFormatter", "configure_logging", "log_record_fields"]

#: The values of `--log-format`.
LOG_FORMATS = ("text", "json")


def _utc(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


def log_record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields of one line: time (UTC, ISO 8601), level, logger, message, and the AUN ids known."""
    fields: dict[str, Any] = {
        "time": _utc(record.created), "level": record.levelname, "logger": record.name, "message": record.getMessage(),
    }
    for name in ("aid", "thread_id", "message_id"):
        value = getattr(record, name, None)
        if value is not None:
            fields[name] = value
    return fields


class _TurnContext(logging.Filter):
    """Adds the acting agent's AID and the inbound message's ids to each record logged in a turn."""

    def filter(self, record: logging.LogRecord) -> bool:
        agent = ACTING.get()
        if agent is not None and not hasattr(record, "aid"):
            record.aid = agent.aid
        message = INBOUND.get()
        if message is not None and not hasattr(record, "message_id"):
            record.message_id = message.message_id
            record.thread_id = message.thread or message.message_id
        return True


class TextFormatter(logging.Formatter):
    """`TIME LEVEL LOGGER: MESSAGE`, the time in UTC."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_utc(record.created)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line (a traceback is a field, never lines of its own)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = log_record_fields(record)
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return json.dumps(fields, default=str)


class _CommandHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler a command logs through (one at a time: a second configuration replaces it)."""


def configure_logging(level: int, log_format: str = "text") -> None:
    """Log to stderr at `level` in `log_format` (`text` or `json`), Python's warnings included.

    As `logging.basicConfig`, it leaves a root logger that has handlers of someone else's alone (a
    command run inside a test, or inside a program that set up its own logging)."""
    root = logging.getLogger()
    if any(not isinstance(handler, _CommandHandler) for handler in root.handlers):
        return
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = _CommandHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(_TurnContext())
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    say_as_json(log_format == "json")
