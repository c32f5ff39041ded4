"""What a process that reaches the host's port cannot do: be a worker it is not, take a worker's
AIDs, acknowledge what it never received, or get a traceback into the host's log with garbage."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Callable
from pathlib import Path
from unittest.mock import ANY

import grpc
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from aun_runtime.distributed._identity import Identities, IdentityRefused, secret_path, worker_secret
from aun_runtime.distributed._wire import control_event

from .processes import Process, query, start_host, start_worker, wait_until
from .raw import RawClient, ack, delivery, hello, host_stats

APPS = "tests.distributed.apps"
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def _name(worker: Process) -> str:
    line = worker.wait_for_line(lambda s: s.startswith("aun-runtime worker ") and " ready on " in s)
    return line.split()[2]


async def _line(process: Process, predicate: Callable[[str], bool]) -> str:
    """Wait for a line of ``process`` without stopping this test's event loop (its raw client sends)."""
    return await asyncio.to_thread(process.wait_for_line, predicate)


def _count(archive: Path, sql: str) -> int:
    rows = query(archive, sql)
    return int(rows[0][0]) if rows else 0


def _worker_with_name(address: str, archive: Path, name: str | None) -> Process:
    """A worker process of the ``sink`` app that is expected to be refused (and exit 1)."""
    extra = ["--name", name] if name is not None else []
    return Process(["worker", "--host", address, "--app", f"{APPS}:sink", "--archive", str(archive), "--connect-timeout", "15", *extra])


def _replies(source_db: Path) -> int:
    return _count(source_db, "SELECT COUNT(*) FROM archive WHERE owner='source.local' AND kind='received'")


def _handled(sink_db: Path) -> list[str]:
    rows = query(sink_db, "SELECT json_extract(body, '$.payload.text') FROM archive WHERE owner='sink.local' AND kind='received' ORDER BY id")
    return [str(text) for (text,) in rows]


def _sink_away_with_messages_kept(
    procs: list[Process], address: str, host: Process, tmp_path: Path, count: int
) -> tuple[str, str]:
    """A sink worker that held sink.local and was killed, and a source whose ``count`` messages to
    it are kept; their names."""
    sink = start_worker(address, f"{APPS}:sink", tmp_path / "sink.sqlite")
    procs.append(sink)
    name = _name(sink)
    sink.kill()
    host.wait_for_line(lambda s: f"worker {name} disconnected" in s)
    source_db = tmp_path / "source.sqlite"
    source = start_worker(address, f"{APPS}:source", source_db, env={"SOURCE_COUNT": str(count)})
    procs.append(source)
    wait_until(lambda: _count(source_db, "SELECT COUNT(*) FROM aun_outbox") == count, what="the messages kept for sink.local")
    return name, _name(source)


async def test_a_name_without_its_secret_is_refused_and_takes_no_aid_while_its_worker_is_live_or_dead(
    procs: list[Process], tmp_path: Path
) -> None:
    host, address = start_host()
    procs.append(host)
    sink_db = tmp_path / "sink.sqlite"
    sink = start_worker(address, f"{APPS}:sink", sink_db)
    procs.append(sink)
    name = _name(sink)
    assert stat.S_IMODE(secret_path(sink_db).stat().st_mode) == 0o600

    # While the worker is live, a process presenting its name (another archive: another secret) is refused.
    impostor = _worker_with_name(address, tmp_path / "impostor.sqlite", name)
    procs.append(impostor)
    assert impostor.finish() == 2  # its name is taken: a configuration error
    assert f"refused worker {name}" in impostor.output and "another secret" in impostor.output
    assert "Traceback" not in impostor.output
    host.wait_for_line(lambda s: "refused a data stream" in s and "UNAUTHENTICATED" in s and name in s)
    assert (await host_stats(address))["aids"] == {"sink.local": [name, "held"]}

    sink.kill()
    host.wait_for_line(lambda s: f"worker {name} disconnected" in s)
    count = 30
    source_db = tmp_path / "source.sqlite"
    procs.append(start_worker(address, f"{APPS}:source", source_db, env={"SOURCE_COUNT": str(count)}))
    wait_until(lambda: _count(source_db, "SELECT COUNT(*) FROM aun_outbox") == count, what="the messages kept for sink.local")

    # After it died: its name with another secret is refused, and so is another worker wanting its AID.
    again = _worker_with_name(address, tmp_path / "again.sqlite", name)
    thief = _worker_with_name(address, tmp_path / "thief.sqlite", None)
    procs += [again, thief]
    assert again.finish() == 2 and "another secret" in again.output
    assert thief.finish() == 1 and f"sink.local belongs to worker {name}, which is away" in thief.output
    assert (await host_stats(address))["aids"] == {"sink.local": [name, "away"], "source.local": [ANY, "held"]}

    # The real worker, restarted with its archive (and so its secret), takes its AID back at once and
    # gets every message that waited for it, once, in order.
    procs.append(start_worker(address, f"{APPS}:sink", sink_db))
    wait_until(lambda: _replies(source_db) >= count, what="every reply")
    assert _handled(sink_db) == [str(n) for n in range(count)]
    assert "Traceback" not in host.output


async def test_an_acknowledgement_counts_only_from_the_stream_that_holds_the_aid(
    procs: list[Process], tmp_path: Path
) -> None:
    host, address = start_host()
    procs.append(host)
    count = 30
    _, origin = _sink_away_with_messages_kept(procs, address, host, tmp_path, count)

    # A stream of its own (a new worker name, its own secret) acknowledges what it never received,
    # then sends a delivery as if it were the source.
    forger = RawClient(address, "forger", "the forger's own secret")
    try:
        forger.open()
        forger.send(hello("forger"))
        await forger.read()  # the directory snapshot: the stream is open
        forger.send(ack(origin, {"sink.local": count}))
        await _line(host, lambda s: "refused an acknowledgement from worker forger for 'sink.local'" in s)
        forger.send(delivery("sink.local", origin, 10**6))
        code, details = await forger.ended()
        assert code == grpc.StatusCode.PERMISSION_DENIED and origin in details
    finally:
        await forger.close()

    # Nothing was dropped: the sink, back, gets every message once, in order.
    sink_db, source_db = tmp_path / "sink.sqlite", tmp_path / "source.sqlite"
    procs.append(start_worker(address, f"{APPS}:sink", sink_db))
    wait_until(lambda: _replies(source_db) >= count, what="every reply")
    assert _handled(sink_db) == [str(n) for n in range(count)]
    assert "Traceback" not in host.output


async def test_malformed_calls_and_garbage_on_the_stream_are_invalid_argument_with_one_line_each(
    procs: list[Process],
) -> None:
    host, address = start_host()
    procs.append(host)
    anonymous = RawClient(address)
    worker = RawClient(address, "tester", "the tester's secret")
    worker.open()
    worker.send(hello("tester"))
    await worker.read()
    calls = [
        (anonymous, "/aun.Directory/Stats", b"\xff not json"),
        (anonymous, "/aun.Directory/Stats", b"[1, 2]"),
        (worker, "/aun.Directory/Group", b"{not json"),
        (worker, "/aun.Directory/Group", b"{}"),
        (worker, "/aun.Directory/Group", b'{"op": "create", "group": "g", "members": [{}], "mode": "broadcast"}'),
        (worker, "/aun.Directory/Group", b'{"op": "create", "group": "g", "members": [], "mode": "loud"}'),
        (worker, "/aun.Directory/Group", b'{"op": "add", "group": "no group!", "aid": "a.local"}'),
        (worker, "/aun.Directory/Leave", b"null"),
        (worker, "/aun.Directory/Leave", b'{"groups": 5}'),
        (anonymous, "/agents.AgentRpc/RegisterAgent", b"\xff\xff\xff\xff"),
        (anonymous, "/agents.AgentRpc/AddSubscription", b"\xff\xff\xff\xff"),
    ]
    try:
        for client, method, body in calls:
            code, details = await client.call(method, body)
            assert code == INVALID, (method, body, code, details)
        streams = [
            b"\xff\xff\xff\xff",  # not a protobuf message
            agent_worker_pb2.Message().SerializeToString(),  # a message with nothing in it
            control_event("aun.hello", "not an object").SerializeToString(),
            ack("tester", {"sink.local": "many"}),  # type: ignore[dict-item]
        ]
        for n, first in enumerate(streams):
            client = RawClient(address, f"garbage-{n}", "a secret")
            try:
                client.open()
                client.send(first)
                code, details = await client.ended()
            finally:
                await client.close()
            assert code == INVALID, (first, code, details)
        assert (await host_stats(address))["aids"] == {}  # and the host still serves
    finally:
        await anonymous.close()
        await worker.close()

    expected = len(calls) + len(streams)
    wait_until(lambda: sum("host: refused" in line for line in host.lines) >= expected, what="a line per refusal")
    refusals = [line for line in host.lines if "host: refused" in line]
    assert len(refusals) == expected and all("INVALID_ARGUMENT" in line for line in refusals), refusals
    assert "Traceback" not in host.output


def test_a_worker_secret_is_made_once_beside_its_archive_and_kept_private(tmp_path: Path) -> None:
    archive = tmp_path / "w.sqlite"
    secret = worker_secret(archive)
    assert stat.S_IMODE(secret_path(archive).stat().st_mode) == 0o600
    assert worker_secret(archive) == secret  # the same worker, restarted
    assert worker_secret(None) != worker_secret(None)  # an in-memory worker is new every run

    identities = Identities()
    assert identities.check("w-1", secret, bind=True) is True  # first use binds the name
    assert identities.check("w-1", secret, bind=True) is False
    for claim in ("another secret", None):
        try:
            identities.check("w-1", claim, bind=True)
        except IdentityRefused:
            pass
        else:
            raise AssertionError(f"{claim!r} was accepted for w-1")
    identities.forget("w-1")  # it left for good: the name is free again
    assert identities.check("w-1", "another secret", bind=True) is True
