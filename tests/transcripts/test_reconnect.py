"""Readers ride out a restart of their PostgreSQL server: `aun-runtime transcript --follow` (a real
process) and the console open the database again, say so once, and go on from the last record
shown: every record written before, during and after the restart shown once.

Each test has a server of its own (the run's shared one must not be crashed under other tests),
durable, so that what was committed before the crash is still there after it (and the record ids
go on from where they were).
"""

from __future__ import annotations

import collections
import contextlib
import json
import re
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from aun_runtime import (
    Archive,
    AUNMessage,
    RecordKind,
    StorageSessionLostError,
    StorageUnavailableError,
    TextPayload,
)
from aun_runtime.testing.infrastructure import PostgresServer
from aun_runtime.transcripts._reconnect import (
    RECONNECT_FIRST,
    RECONNECT_MAX,
    Reconnection,
    is_connection_lost,
)
from tests.distributed.processes import Process, wait_until

#: Seconds the server stays down: long enough that the readers fail a few attempts to open it again.
DOWN_FOR = 3.0


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with PostgresServer(durable=True) as started:
        yield started


class Writer(threading.Thread):
    """Writes one record every 50 ms through an archive of its own, opening it again whenever a
    write fails; each attempt's text is new (`m<n>.<attempt>`), so a record is never mistaken for
    another, whatever a failed commit left behind."""

    def __init__(self, url: str) -> None:
        super().__init__(name="archive-writer", daemon=True)
        self.url = url
        self.written = 0  # records whose commit returned
        self.stop = threading.Event()

    def run(self) -> None:
        archive: Archive | None = None
        n = attempt = 0
        while not self.stop.is_set():
            attempt += 1
            try:
                archive = archive or Archive(self.url)
                message = AUNMessage(
                    message_id=f"m{n}.{attempt}", from_aid="a.local", to="b.local", payload=TextPayload(text=f"m{n}.{attempt}")
                )
                archive.record("a.local", RecordKind.SENT, message)
                archive.flush()
                n += 1
                self.written = n
            except Exception:
                if archive is not None:
                    with contextlib.suppress(Exception):
                        archive.close()
                archive = None
            time.sleep(0.05)
        if archive is not None:
            archive.close()


def _texts_in(url: str) -> list[str]:
    archive = Archive(url, read_only=True)
    try:
        return [record.text or "" for record in archive.records_after(0, limit=100_000)]
    finally:
        archive.close()


def _across_a_restart(server: PostgresServer, url: str, shown: Iterator[int]) -> Writer:
    """Write before, during and after a restart; `shown` yields how many the reader has shown."""
    writer = Writer(url)
    writer.start()
    wait_until(lambda: writer.written >= 20 and next(shown) >= 10, timeout=60, what="records before the restart")
    server.crash()
    time.sleep(DOWN_FOR)
    server.start_again()
    after = writer.written
    wait_until(lambda: writer.written >= after + 30, timeout=60, what="records after the restart")
    writer.stop.set()
    writer.join(timeout=30)
    return writer


def test_transcript_follow_shows_every_record_once_across_a_restart(server: PostgresServer) -> None:
    url = server.create_database()
    Archive(url).close()  # the tables
    follow = Process(["transcript", "--archive", url, "--follow"])
    try:
        printed = lambda: re.findall(r"'(m\d+\.\d+)'", follow.output)  # noqa: E731
        _across_a_restart(server, url, iter(lambda: len(printed()), None))
        expected = _texts_in(url)
        wait_until(lambda: len(printed()) >= len(expected), timeout=30, what="the reader to catch up")
        follow.proc.send_signal(signal.SIGTERM)
        assert follow.finish(timeout=30) == 0, follow.output
    finally:
        follow.kill()
    shown = printed()
    assert [text for text, count in collections.Counter(shown).items() if count > 1] == []  # nothing twice
    assert sorted(shown) == sorted(expected)  # nothing skipped, before, during or after the restart
    output = follow.output
    assert output.count("lost the database") == 1, output  # said once, however many attempts it took
    assert output.count("reconnected to") == 1, output
    assert "Traceback" not in output and "StorageSessionLostError" not in output, output


def test_the_console_goes_on_across_a_restart(server: PostgresServer) -> None:
    url = server.create_database()
    Archive(url).close()
    console = Process(["console", "--archive", url, "--port", "0"])
    try:
        line = console.wait_for_line(lambda s: "console: http://" in s)
        base = line[line.index("http://") :].split()[0]

        def records_after(after: int) -> list[dict[str, object]]:
            with urllib.request.urlopen(f"{base}api/records?after={after}", timeout=10) as response:
                return list(json.load(response)["records"])

        seen: list[dict[str, object]] = []

        def read() -> int:  # a page following the archive: each read goes on after the last record it got
            with contextlib.suppress(OSError):
                seen.extend(records_after(int(str(seen[-1]["id"])) if seen else 0))
            return len(seen)

        _across_a_restart(server, url, iter(read, None))
        expected = _texts_in(url)
        wait_until(lambda: read() >= len(expected), timeout=30, what="the console to catch up")
        console.proc.send_signal(signal.SIGTERM)
        assert console.finish(timeout=30) == 0, console.output
    finally:
        console.kill()
    texts = [record["message"]["payload"]["text"] for record in seen]  # type: ignore[index]
    assert sorted(texts) == sorted(expected)
    output = console.output
    assert output.count("lost the database") == 1, output
    assert output.count("reconnected to") == 1, output
    assert "Traceback" not in output, output


def test_a_reconnection_says_so_once_each_way_and_backs_off_to_its_bound() -> None:
    said: list[str] = []
    reconnection = Reconnection("postgresql://aun@db/aun", said.append)
    waits = []
    for _ in range(8):
        reconnection.lost(StorageSessionLostError("the session with postgresql://aun@db/aun has ended"))
        waits.append(reconnection.wait())
    assert said == [
        "lost the database postgresql://aun@db/aun (the session with it has ended); reconnecting, every 2 s at most"
    ]
    # Doubled from the first wait up to the bound (each measured a moment after it was set).
    doubling = [min(RECONNECT_FIRST * 2**n, RECONNECT_MAX) for n in range(8)]
    assert waits == pytest.approx(doubling, abs=0.1)
    reconnection.back("going on after record id 7")
    assert said[-1].startswith("reconnected to postgresql://aun@db/aun after ")
    assert said[-1].endswith("; going on after record id 7")
    reconnection.back("again")  # not lost since: nothing to say
    assert len(said) == 2 and reconnection.wait() == 0


class _ServerError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def test_only_a_database_that_went_away_counts_as_lost() -> None:
    assert is_connection_lost(StorageSessionLostError("ended"))
    assert is_connection_lost(StorageUnavailableError("cannot open"))
    assert is_connection_lost(ConnectionRefusedError())
    assert is_connection_lost(_ServerError("57P01"))  # admin shutdown
    assert is_connection_lost(_ServerError("57P03"))  # the server is starting up
    assert is_connection_lost(_ServerError("08006"))  # connection failure
    assert not is_connection_lost(_ServerError("42P01"))  # no such table: the reader waits for the writer
    assert not is_connection_lost(_ServerError("42601"))  # a syntax error is a bug, never retried
    assert not is_connection_lost(ValueError("not an archive"))
