"""How loud the AUN client (`fastaun`'s `aun_core`) is on stderr.

The client does not log through `logging`: every `AUNLogger` it makes (one per client, and a
new one each time it rebuilds an identity, handed on to its agent.md store, its key stores and its
network code) prints `[LEVEL][module]` lines to stderr itself, INFO and up by default, DEBUG too
when `~/.aun/log.ini` asks. Our commands keep stderr for their own logging, so by default only
the client's warnings and errors get through, and not the agent.md store's warnings (a missing
agent.md file of a new identity is normal here). `--client-log-level` or `AUN_CLIENT_LOG_LEVEL`
(`debug`, `info`, `warn`, `error`) sets one level for all of it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

__all__ = ["CLIENT_LOG_ENV", "CLIENT_LOG_LEVELS", "client_log_level", "set_client_log_level"]

#: The environment variable that sets the client's level when the option is not given.
CLIENT_LOG_ENV = "AUN_CLIENT_LOG_LEVEL"
CLIENT_LOG_LEVELS = ("debug", "info", "warn", "error")
_ORDER = {name: n for n, name in enumerate(CLIENT_LOG_LEVELS)}
#: The default floor, and the client modules held to a higher one by default.
DEFAULT_LEVEL = "warn"
DEFAULT_MODULE_LEVELS = {"agent_md": "error"}

_floor = _ORDER["debug"]
_module_floors: dict[str, int] = {}


def client_log_level(option: str | None = None) -> str | None:
    """The level asked for: the option, else `AUN_CLIENT_LOG_LEVEL`, else None (the default)."""
    level = option or os.environ.get(CLIENT_LOG_ENV, "").strip().lower() or None
    if level is not None and level not in _ORDER:
        raise SystemExit(f"error: the client log level is one of {', '.join(CLIENT_LOG_LEVELS)} (got {level!r})")
    return level


def set_client_log_level(level: str | None = None) -> None:
    """Hold every AUN client logger, existing or future, to `level` (None: warnings and errors,
    and only errors from the agent.md store). Does nothing if the client is not installed."""
    global _floor, _module_floors
    try:
        from aun_core.logger import AUNLogger
    except ImportError:
        return
    if level is None:
        _floor = _ORDER[DEFAULT_LEVEL]
        _module_floors = {module: _ORDER[name] for module, name in DEFAULT_MODULE_LEVELS.items()}
    else:
        _floor = _ORDER[level]
        _module_floors = {}
    if getattr(AUNLogger, "_aun_runtime_floor", False):
        return
    for name in CLIENT_LOG_LEVELS:
        setattr(AUNLogger, name, _held(getattr(AUNLogger, name), _ORDER[name]))
    AUNLogger._aun_runtime_floor = True  # type: ignore[attr-defined]


def _held(method: Callable[..., None], rank: int) -> Callable[..., None]:
    @functools.wraps(method)
    def log(self: Any, module: str, msg: str, *args: Any, **kwargs: Any) -> None:
        if rank < max(_floor, _module_floors.get(module, _floor)):
            return
        method(self, module, msg, *args, **kwargs)

    return log
