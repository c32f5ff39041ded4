"""A worker logs the AIDs it holds once it holds them, not an empty list first."""

from __future__ import annotations

from pathlib import Path

from .processes import Process, start_worker

APPS = "tests.distributed.apps"


def test_a_worker_logs_the_aids_its_app_registered(host: str, procs: list[Process], tmp_path: Path) -> None:
    worker = start_worker(host, f"{APPS}:team_reviewer_side", tmp_path / "b.sqlite")
    procs.append(worker)
    line = worker.wait_for_line(lambda s: "registered" in s and "AIDs" in s)
    assert line.endswith("registered 2 AIDs: reviewer.local, scribe.local"), worker.output
    assert "registered 0 AIDs" not in worker.output
