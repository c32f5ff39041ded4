"""What a commit survives, tried with real crashes: a PostgreSQL server stopped as a crash stops it
while a service AID on two machines handles a stream (its instances ride out the restart without
being started again), and an SQLite worker killed with SIGKILL.

Exactly once rests on one order: a handling is committed, and only then is its message acknowledged
and its reply sent. A commit that returns before it is on disk breaks that order when the database
crashes: the sender, acknowledged, forgets a message whose handling is gone (lost), or gets a reply
whose handling is gone and is handled again (doubled). The runtime's sessions make their commits
durable whatever the server's `synchronous_commit` says; `off` is the setting that would show it.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from aun_runtime.testing.infrastructure import PostgresServer, PrivateNetwork

from .processes import (
    Process,
    query,
    received_texts,
    shared_received_texts,
    start_host,
    start_worker,
    wait_until,
)

SERVICE_APPS = "tests.distributed.service_apps"
APPS = "tests.distributed.apps"
AID = "svc.local"
#: A port inside the host's own namespace: nothing else can hold it there.
HOST_PORT = 50051
STREAM = 500
#: Handled messages after which the server crashes: well inside the stream, with commits under way.
CRASH_AT = 150
#: Seconds the server stays down.
DOWN = 3.0
#: Seconds without any progress after which the stream is taken as finished (or stuck for good).
QUIET = 10.0


def _once_each(texts: list[str], expected: list[str]) -> tuple[list[str], list[str]]:
    """(missing, doubled) of `texts` against `expected`."""
    counts = Counter(texts)
    return [t for t in expected if counts[t] == 0], sorted(t for t, n in counts.items() if n > 1)


@pytest.mark.parametrize("synchronous_commit", ["off", "on"])
def test_a_service_on_two_machines_handles_every_message_once_across_a_database_crash(
    private_network: PrivateNetwork, procs: list[Process], tmp_path: Path, synchronous_commit: str
) -> None:
    machines = {label: private_network.add(label) for label in ("db", "host", "a", "b", "sender")}
    db = machines["db"]
    # fsync stays on (durable=True), as on a real server. At `off`, the WAL writer flushes a commit
    # within `wal_writer_delay` (200 ms by default); 10 s puts every crash inside that window, so that
    # the outcome does not hang on when, between two flushes, the crash lands.
    settings = {"synchronous_commit": synchronous_commit, "wal_writer_delay": "10s"}
    server = PostgresServer(host=db.address, port=5432, prefix=db.command([]), durable=True, settings=settings).start()
    try:
        assert server.sql("SHOW synchronous_commit").strip() == synchronous_commit
        url = server.url("postgres")
        address = f"{machines['host'].address}:{HOST_PORT}"
        host, _ = start_host(address, prefix=machines["host"].command([]))
        procs.append(host)

        def instance(label: str) -> Process:
            process = start_worker(
                address, f"{SERVICE_APPS}:instance", url,
                env={"HOME": str(tmp_path)},
                extra=["--name", label, "--service", f"{AID}=round_robin"],
                prefix=machines[label].command([]),
            )  # fmt: skip
            procs.append(process)
            return process

        instances = {label: instance(label) for label in ("a", "b")}
        sender_db = tmp_path / "sender.sqlite"
        env = {"SOURCE_COUNT": str(STREAM), "SOURCE_BURST": "10", "SOURCE_PAUSE": "0.05"}
        procs.append(start_worker(address, f"{SERVICE_APPS}:sender", sender_db, env=env, prefix=machines["sender"].command([])))

        wait_until(lambda: len(shared_received_texts(server)) >= CRASH_AT, timeout=120, what="the stream under way")
        server.crash()
        crashed = time.monotonic()
        time.sleep(max(0.0, DOWN - (time.monotonic() - crashed)))
        server.start_again()
        assert len(shared_received_texts(server)) < STREAM, "the crash must land in the middle of the stream"
        # Nobody starts anything again: the instances ride out the restart in their own processes.

        expected = [str(n) for n in range(STREAM)]
        progress: tuple[int, int] = (-1, -1)
        quiet_since = time.monotonic()
        while len(set(shared_received_texts(server))) < STREAM or len(set(received_texts(sender_db))) < STREAM:
            now = (len(shared_received_texts(server)), len(received_texts(sender_db)))
            if now != progress:
                progress, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since > QUIET:
                break  # a message that was lost never comes: the assertions below say which
            time.sleep(0.2)
        time.sleep(1)  # anything handled twice would show by now

        missing, doubled = _once_each(shared_received_texts(server), expected)
        assert (missing, doubled) == ([], []), f"archive: missing {missing}, handled twice {doubled}"
        missing, doubled = _once_each(received_texts(sender_db), [f"done {n}" for n in range(STREAM)])
        assert (missing, doubled) == ([], []), f"sender: no reply to {missing}, two replies to {doubled}"
        for label, process in instances.items():  # still running, and they said they came back
            assert process.proc.poll() is None, f"instance {label} exited: {process.output}"
            assert any("rejoined" in line for line in process.lines), process.output
    finally:
        for process in procs:
            process.kill()
        server.stop()


def test_what_a_sqlite_worker_acknowledged_or_answered_is_in_its_file_after_a_sigkill(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    sink_db, source_db = tmp_path / "sink.sqlite", tmp_path / "source.sqlite"
    sink = start_worker(host, f"{APPS}:sink", sink_db)
    procs.append(sink)
    env = {"SOURCE_COUNT": "2000", "SOURCE_BURST": "20", "SOURCE_PAUSE": "0.01"}
    procs.append(start_worker(host, f"{APPS}:source", source_db, env=env))

    def acknowledged_by_sink() -> int:
        unacknowledged = query(source_db, "SELECT MIN(seq) FROM aun_outbox WHERE aid = 'sink.local'")[0][0]
        sent = query(source_db, "SELECT last_seq FROM aun_out_streams WHERE aid = 'sink.local'")
        return (unacknowledged if unacknowledged is not None else (sent[0][0] if sent else 0) + 1) - 1

    # The source commits the answers it receives and the acknowledgements it is given separately:
    # under load one can lag the other, so the stream is under way when both are.
    wait_until(lambda: len(received_texts(source_db)) >= 300 and acknowledged_by_sink() >= 300, what="the stream under way")
    sink.proc.kill()  # no flush, no goodbye
    sink.proc.wait()
    # What the source holds now was acknowledged or answered before the kill: it is what the sink
    # had told others it had committed.
    answered = {text.removeprefix("done ") for text in received_texts(source_db)}
    acknowledged = acknowledged_by_sink()
    kept = Counter(
        str(text)
        for (text,) in query(
            sink_db, "SELECT json_extract(body, '$.payload.text') FROM archive WHERE owner = 'sink.local' AND kind = 'received'"
        )
    )
    assert len(kept) < 2000, "the kill must land in the middle of the stream"
    assert acknowledged >= 300
    # Stream positions count from 1: message n is the stream's n + 1st.
    assert [str(n) for n in range(acknowledged) if kept[str(n)] != 1] == []
    assert sorted(n for n in answered if kept[n] != 1) == []
