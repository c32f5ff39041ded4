"""A worker's options that do not go together are refused before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from aun_runtime.distributed import WorkerRuntime


def test_an_unknown_service_policy_is_refused_before_the_archive_opens(tmp_path: Path) -> None:
    archive = tmp_path / "worker.sqlite"
    with pytest.raises(ValueError, match="service shop: unknown policy 'nearest'; one of"):
        WorkerRuntime("127.0.0.1:1", archive=archive, name="w1", services={"shop": "nearest"})
    assert list(tmp_path.iterdir()) == []  # no archive, no secret, no ledger


def test_a_service_instance_needs_a_durable_archive() -> None:
    with pytest.raises(ValueError, match="a service instance needs a durable archive"):
        WorkerRuntime("127.0.0.1:1", name="w1", services={"shop": "round_robin"})
