"""Workers on a PostgreSQL archive, as real processes: what they refuse to start with, and one name
run once across the machines that share the database."""

from __future__ import annotations

from pathlib import Path

from .processes import Process, start_worker

SERVICE_APPS = "tests.distributed.service_apps"


def _worker(host: str, *args: str) -> Process:
    return Process(["worker", "--host", host, "--app", f"{SERVICE_APPS}:instance", "--connect-timeout", "10", *args])


def test_a_worker_on_a_shared_database_needs_a_name_and_its_ledger_there(
    host: str, procs: list[Process], tmp_path: Path, postgres_url: str
) -> None:
    nameless = _worker(host, "--archive", postgres_url)
    procs.append(nameless)
    assert nameless.finish() == 2  # a configuration error
    assert "needs a name (--name)" in nameless.output

    elsewhere = _worker(
        host, "--archive", str(tmp_path / "w.sqlite"), "--service", "svc.local", "--service-ledger", postgres_url
    )
    procs.append(elsewhere)
    assert elsewhere.finish() == 2
    assert "a PostgreSQL service ledger needs the worker's archive in the same database" in elsewhere.output


def test_one_name_runs_once_across_the_machines_that_share_the_database(
    host: str, procs: list[Process], postgres_url: str
) -> None:
    first = start_worker(host, f"{SERVICE_APPS}:instance", postgres_url, extra=["--name", "one", "--service", "svc.local"])
    procs.append(first)
    second = _worker(host, "--archive", postgres_url, "--name", "one", "--service", "svc.local")
    procs.append(second)
    assert second.finish(timeout=60) == 1
    assert "worker one already runs in another process" in second.output
    assert first.proc.poll() is None  # the first goes on
    assert first.terminate() == 0
    again = start_worker(host, f"{SERVICE_APPS}:instance", postgres_url, extra=["--name", "one", "--service", "svc.local"])
    procs.append(again)  # once it stopped, the name may run again (its lock went with its session)
