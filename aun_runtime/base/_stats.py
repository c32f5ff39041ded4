"""`RuntimeStats`: the counters of what happened to a runtime's messages."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RuntimeStats"]


@dataclass
class RuntimeStats:
    """Counters of what happened to messages. Nothing here is ever silent."""

    sent: int = 0
    delivered: int = 0
    filtered: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    loop_stops: int = 0
    budget_stops: int = 0
    #: Dead letters whose handler ran past its handler timeout (counted in ``dead_letters`` too).
    handler_timeouts: int = 0
    #: Answers of a model that were not answers (no choices, nothing said, a tool call that cannot
    #: be read or names no tool): each is archived as a ``model_anomaly``.
    model_anomalies: int = 0
    #: Model requests sent again after a 429, a 5xx, a timeout or a dropped connection.
    model_retries: int = 0
    #: Turns tried again after a transient failure (see ``TurnRetry``).
    turn_retries: int = 0
    #: Dead letters by the kind of error that made them (its class name), for `/metrics`.
    dead_letter_reasons: dict[str, int] = field(default_factory=dict, repr=False)
