"""A host and workers as separate processes on 127.0.0.1: same traces, nothing lost, nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aun_runtime import AUNRuntime

from . import apps
from .processes import Process, query, start_host, start_worker, wait_until

APPS = "tests.distributed.apps"


def _trace(archive: Path, owners: list[str]) -> dict[str, list[tuple[str, str, str]]]:
    """What each owner was shown or shielded from, in order: (kind, sender, text)."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for owner in owners:
        rows = query(
            archive,
            "SELECT kind, from_aid, COALESCE(json_extract(body, '$.payload.text'),"
            " json_extract(body, '$.payload.fallback_text')) FROM archive"
            " WHERE owner = ? AND kind IN ('received', 'filtered') ORDER BY id",
            (owner,),
        )
        out[owner] = [(str(k), str(f), str(t)) for k, f, t in rows]
    return out


def _count(archive: Path, sql: str, args: tuple[object, ...] = ()) -> int:
    rows = query(archive, sql, args)
    return int(rows[0][0]) if rows else 0


async def test_a_team_split_across_workers_leaves_the_same_trace_as_in_one_process(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    single = tmp_path / "single.sqlite"
    runtime = AUNRuntime(archive=single)
    await runtime.start()
    await apps.team_in_one_process(runtime)
    await runtime.settle()
    await runtime.close()
    expected = _trace(single, ["writer.local", "reviewer.local", "scribe.local", "app.local"])
    assert len(expected["writer.local"]) == 7  # task, 3 reviews (filtered), 2 revisions, approval
    assert expected["scribe.local"][-1] == ("received", "writer.local", "final: draft 3")

    side_a, side_b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    procs.append(start_worker(host, f"{APPS}:team_writer_side", side_a))
    procs.append(start_worker(host, f"{APPS}:team_reviewer_side", side_b))
    procs.append(start_worker(host, f"{APPS}:team_kickoff", tmp_path / "kick.sqlite"))

    def finished() -> bool:
        return _count(side_a, "SELECT COUNT(*) FROM archive WHERE owner='app.local' AND kind='received'") >= 1

    wait_until(finished, what="the final post to reach app.local")
    wait_until(lambda: len(_trace(side_b, ["scribe.local"])["scribe.local"]) >= 4, what="the scribe's last post")
    split = _trace(side_a, ["writer.local", "app.local"]) | _trace(side_b, ["reviewer.local", "scribe.local"])
    assert split == expected


async def test_the_reflection_team_split_across_workers_leaves_the_same_trace_as_in_one_process(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    owners = ["coder.local", "executor.local", "reviewer.local", "app.local"]
    single = tmp_path / "single.sqlite"
    runtime = AUNRuntime(archive=single)
    await runtime.start()
    await apps.reflection_in_one_process(runtime)
    await runtime.settle()
    await runtime.close()
    expected = _trace(single, owners)
    [(_, sender, result)] = expected["app.local"]
    assert (sender, result) == ("reviewer.local", "task fib approved after 2 round(s)")
    assert len(expected["executor.local"]) == 2  # the first attempt was rejected, the second approved

    side_a, side_b = tmp_path / "coder.sqlite", tmp_path / "review.sqlite"
    procs.append(start_worker(host, f"{APPS}:reflection_coder_side", side_a))
    procs.append(start_worker(host, f"{APPS}:reflection_review_side", side_b))
    procs.append(start_worker(host, f"{APPS}:reflection_kickoff", tmp_path / "kick.sqlite"))

    def finished() -> bool:
        return _count(side_a, "SELECT COUNT(*) FROM archive WHERE owner='app.local' AND kind='received'") >= 1

    wait_until(finished, what="the coding result to reach app.local")
    split = _trace(side_a, ["coder.local", "app.local"]) | _trace(side_b, ["executor.local", "reviewer.local"])
    assert split == expected


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
async def test_a_worker_killed_mid_stream_and_restarted_handles_each_message_exactly_once_in_order(
    host: str, procs: list[Process], tmp_path: Path, stop: str
) -> None:
    count = 500
    sink_db, source_db = tmp_path / "sink.sqlite", tmp_path / "source.sqlite"
    slow = {"TALLY_DELAY": "0.002"}
    sink = start_worker(host, f"{APPS}:sink", sink_db, env=slow)
    procs.append(sink)
    env = {"SOURCE_COUNT": str(count), "SOURCE_BURST": "50", "SOURCE_PAUSE": "0.05"}
    procs.append(start_worker(host, f"{APPS}:source", source_db, env=env))

    def received() -> int:
        return _count(sink_db, "SELECT COUNT(*) FROM archive WHERE owner='sink.local' AND kind='received'")

    wait_until(lambda: received() >= 120, what="the sink to be well into the stream")
    if stop == "SIGKILL":
        sink.proc.kill()  # no flush, no goodbye
        sink.proc.wait()
    else:
        assert sink.terminate() == 0  # a clean stop while handlers are running
    assert received() < count, "the kill must land in the middle of the stream"
    restarted = start_worker(host, f"{APPS}:sink", sink_db, env=slow)
    procs.append(restarted)

    def replies() -> int:
        return _count(source_db, "SELECT COUNT(*) FROM archive WHERE owner='source.local' AND kind='received'")

    wait_until(lambda: replies() >= count, timeout=90, what="every reply")
    handled = [t for _, _, t in _trace(sink_db, ["sink.local"])["sink.local"]]
    assert handled == [str(n) for n in range(count)]  # once each, in order
    thoughts = query(sink_db, "SELECT body FROM archive WHERE owner='sink.local' AND kind='thought' ORDER BY id")
    assert [b for (b,) in thoughts] == [f"handled {n}" for n in range(count)]
    answers = [t for _, _, t in _trace(source_db, ["source.local"])["source.local"]]
    assert answers == [f"done {n}" for n in range(count)]
    assert _count(sink_db, "SELECT COUNT(*) FROM archive WHERE kind='dead_letter'") == 0


async def test_after_a_host_restart_workers_reconnect_and_nothing_is_lost(
    procs: list[Process], tmp_path: Path
) -> None:
    host_process, address = start_host()
    procs.append(host_process)
    count = 300
    sink_db, source_db = tmp_path / "sink.sqlite", tmp_path / "source.sqlite"
    sink = start_worker(address, f"{APPS}:sink", sink_db)
    procs.append(sink)
    env = {"SOURCE_COUNT": str(count), "SOURCE_BURST": "10", "SOURCE_PAUSE": "0.02"}
    source = start_worker(address, f"{APPS}:source", source_db, env=env)
    procs.append(source)

    def replies() -> int:
        return _count(source_db, "SELECT COUNT(*) FROM archive WHERE owner='source.local' AND kind='received'")

    wait_until(lambda: replies() >= 30, what="traffic before the restart")
    host_process.kill()
    host_process.proc.wait()
    assert replies() < count
    sink.wait_for_line(lambda s: "reconnecting" in s)
    source.wait_for_line(lambda s: "reconnecting" in s)
    restarted, again = start_host(address)
    procs.append(restarted)
    assert again == address

    wait_until(lambda: replies() >= count, timeout=90, what="every reply after the restart")
    answers = [t for _, _, t in _trace(source_db, ["source.local"])["source.local"]]
    assert answers == [f"done {n}" for n in range(count)]
    handled = [t for _, _, t in _trace(sink_db, ["sink.local"])["sink.local"]]
    assert handled == [str(n) for n in range(count)]
    for worker in (sink, source):
        worker.wait_for_line(lambda s: "connected to" in s and "reconnect" not in s)
    assert any("registered sink.local" in line for line in restarted.lines)  # registered again
    assert sum("connected (client" in line for line in restarted.lines) == 2  # both workers came back


async def test_a_message_to_an_aid_nobody_holds_yet_arrives_once_its_worker_starts(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    early_db, late_db = tmp_path / "early.sqlite", tmp_path / "late.sqlite"
    early = start_worker(host, f"{APPS}:early_bird", early_db)
    procs.append(early)
    early.wait_for_line(lambda s: "dead letter" in s and "late.local" in s)  # said, not only recorded
    wait_until(lambda: bool(query(early_db, "SELECT 1 FROM archive WHERE kind='dead_letter'")), what="a record")
    [(reason,)] = query(early_db, "SELECT reason FROM archive WHERE kind='dead_letter'")
    assert "UnknownAIDError" in reason and "kept" in reason  # refused for now, with a clear record

    procs.append(start_worker(host, f"{APPS}:late", late_db))

    def arrived() -> list[tuple[object, ...]]:
        return query(late_db, "SELECT from_aid, json_extract(body, '$.payload.text') FROM archive WHERE owner='late.local' AND kind='received'")

    wait_until(lambda: bool(arrived()), what="the kept message")
    assert arrived() == [("early.local", "are you there yet?")]

    status = Process(["status", "--host", host])
    assert status.finish() == 0
    report = json.loads(status.output)
    assert report["aids"]["late.local"][1] == "held" and report["aids"]["early.local"][1] == "held"
    assert report["stats"]["workers_connected"] == 2 and report["stats"]["registrations"] >= 2
