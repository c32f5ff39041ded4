"""Fixtures for tests with real host and worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .processes import Process, start_host


@pytest.fixture
def procs() -> Iterator[list[Process]]:
    """Every process a test starts goes in here; all are killed in teardown, whatever happened."""
    started: list[Process] = []
    yield started
    for process in started:
        process.kill()


@pytest.fixture
def host(procs: list[Process]) -> str:
    process, address = start_host()
    procs.append(process)
    return address


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
