"""The Budgets field list is derived from the dataclass, so a new limit is never forgotten."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest

from aun_runtime import Budgets


@dataclass(frozen=True)
class WithAnotherLimit(Budgets):
    """Budgets with one limit more, as a later version may add one."""

    tool_calls_per_thread: int = 5


def test_unlimited_lifts_every_limit_even_one_added_later() -> None:
    unlimited = WithAnotherLimit.unlimited()
    assert unlimited.tool_calls_per_thread >= 2**62
    for f in fields(Budgets):
        if f.name not in ("window", "threads_tracked"):
            assert getattr(Budgets.unlimited(), f.name) >= 2**62, f.name
    assert Budgets.unlimited().threads_tracked == Budgets().threads_tracked  # memory stays bounded


def test_every_count_refuses_a_negative_value_even_one_added_later() -> None:
    with pytest.raises(ValueError, match="tool_calls_per_thread"):
        WithAnotherLimit(tool_calls_per_thread=-1)
    for f in fields(Budgets):
        if f.name != "window":
            with pytest.raises(ValueError, match=f.name):
                Budgets(**{f.name: -1})
