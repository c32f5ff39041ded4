"""A host that remembers: after a restart with its state file, nobody can claim a name, an AID or
a service AID that was someone else's, and the real workers take theirs back and go on."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import grpc
import pytest

from aun_runtime.distributed import AUNHost, HostStateError

from .processes import Process, query, start_host, start_worker, wait_until
from .raw import RawClient, hello, host_stats

APPS = "tests.distributed.apps"
SERVICE_APPS = "tests.distributed.service_apps"
SERVICE = "svc.local"


def _name(worker: Process) -> str:
    line = worker.wait_for_line(lambda s: s.startswith("aun-runtime worker ") and " ready on " in s)
    return line.split()[2]


def _texts(archive: Path, owner: str) -> list[str]:
    rows = query(
        archive,
        "SELECT json_extract(body, '$.payload.text') FROM archive WHERE owner = ? AND kind = 'received' ORDER BY id",
        (owner,),
    )
    return [str(text) for (text,) in rows]


def _claimant(address: str, archive: Path, *extra: str, app: str = f"{APPS}:sink") -> Process:
    """A worker that is expected to be refused, and so to exit 1."""
    return Process(["worker", "--host", address, "--app", app, "--archive", str(archive), "--connect-timeout", "15", *extra])


def _freeze(workers: list[Process]) -> None:
    for worker in workers:
        os.kill(worker.proc.pid, signal.SIGSTOP)


def _thaw(workers: list[Process]) -> None:
    for worker in workers:
        os.kill(worker.proc.pid, signal.SIGCONT)


async def test_after_a_restart_the_host_refuses_claimants_and_the_real_workers_go_on_with_nothing_lost(
    procs: list[Process], tmp_path: Path
) -> None:
    state = tmp_path / "host" / "host.state"
    host, address = start_host(extra=["--state", str(state)])
    procs.append(host)
    sink_db, source_db = tmp_path / "sink.sqlite", tmp_path / "source.sqlite"
    sink = start_worker(address, f"{APPS}:sink", sink_db)
    instance = start_worker(
        address, f"{SERVICE_APPS}:instance", tmp_path / "instance.sqlite", extra=["--service", SERVICE, "--service-dir", str(tmp_path)]
    )
    count = 300
    env = {"SOURCE_COUNT": str(count), "SOURCE_BURST": "10", "SOURCE_PAUSE": "0.02"}
    source = start_worker(address, f"{APPS}:source", source_db, env=env)
    real = [sink, instance, source]
    procs.extend(real)
    sink_name, instance_name = _name(sink), _name(instance)
    wait_until(lambda: len(_texts(source_db, "source.local")) >= 30, what="traffic before the restart")

    # The host dies; its workers are held still so that the claimants reach the new host first.
    host.kill()
    _freeze(real)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    restarted, again = start_host(address, extra=["--state", str(state)])
    procs.append(restarted)
    assert again == address
    try:
        before = await host_stats(address)
        assert before["aids"]["sink.local"] == [sink_name, "away"]  # known, and kept for its owner
        assert before["services"][SERVICE]["instances"] == {instance_name: "away"}

        impostor = _claimant(address, tmp_path / "impostor.sqlite", "--name", sink_name)
        thief = _claimant(address, tmp_path / "thief.sqlite")
        usurper = _claimant(
            address, tmp_path / "usurper.sqlite", "--service", SERVICE, "--service-dir", str(tmp_path / "elsewhere"),
            app=f"{SERVICE_APPS}:instance",
        )  # fmt: skip
        procs += [impostor, thief, usurper]
        assert impostor.finish() == 2 and "another secret" in impostor.output  # its --name is taken
        assert thief.finish() == 1 and f"sink.local belongs to worker {sink_name}, which is away" in thief.output
        assert usurper.finish() == 1 and "not the secret of the service's instances" in usurper.output
    finally:
        _thaw(real)

    wait_until(lambda: len(_texts(source_db, "source.local")) >= count, timeout=90, what="every reply after the restart")
    assert _texts(sink_db, "sink.local") == [str(n) for n in range(count)]  # once each, in order
    assert _texts(source_db, "source.local") == [f"done {n}" for n in range(count)]
    after = await host_stats(address)
    assert after["aids"]["sink.local"] == [sink_name, "held"]
    assert after["services"][SERVICE]["instances"] == {instance_name: "live"}
    assert after["workers"] == sorted([sink_name, instance_name, _name(source)])


async def test_the_state_file_keeps_digests_groups_and_leaving_and_is_one_hosts_alone(tmp_path: Path) -> None:
    state = tmp_path / "host.state"
    host = AUNHost("127.0.0.1:0", state=state)
    await host.open()
    with pytest.raises(HostStateError, match="state file of another host"):
        AUNHost("127.0.0.1:0", state=state)
    stays, leaves = RawClient(host.address, "stays", "the secret of stays"), RawClient(host.address, "leaves", "a secret")
    try:
        for client in (stays, leaves):
            client.open()
            client.send(hello(client.metadata[1][1]))
            await client.read()  # the directory snapshot: the stream is open
        assert (await stays.register("keeper.local"))[0] == grpc.StatusCode.OK
        code, answer = await stays.json("Group", {"op": "create", "group": "room", "mode": "broadcast", "members": ["keeper.local"]})
        assert code == grpc.StatusCode.OK, answer
        assert (await leaves.register("gone.local"))[0] == grpc.StatusCode.OK
        assert (await leaves.json("Leave", {"groups": []}))[0] == grpc.StatusCode.OK
    finally:
        for client in (stays, leaves):
            await client.close()
        await host.stop(grace=0)

    kept = json.loads(state.read_text())
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert [name for name in os.listdir(tmp_path) if name.startswith(".")] == []  # no temporary file left
    assert "the secret of stays" not in state.read_text() and len(kept["workers"]["stays"]) == 64  # a digest
    assert kept["aids"] == {"keeper.local": "stays"} and "leaves" not in kept["workers"]

    again = AUNHost("127.0.0.1:0", state=state)  # the first host stopped: its file may be used again
    await again.open()
    stranger = RawClient(again.address, "stays", "another secret")
    newcomer = RawClient(again.address, "leaves", "a new secret")  # the name was let go by leaving
    try:
        stats = await host_stats(again.address)
        assert stats["aids"] == {"keeper.local": ["stays", "away"]}
        assert stats["groups"]["room"] == {"members": ["keeper.local"], "mode": "broadcast", "holder": "stays"}
        stranger.open()
        assert (await stranger.ended())[0] == grpc.StatusCode.UNAUTHENTICATED
        newcomer.open()
        newcomer.send(hello("leaves"))
        await newcomer.read()
        code, details = await newcomer.register("keeper.local")
        assert code == grpc.StatusCode.ALREADY_EXISTS and "belongs to worker stays" in details
        assert (await newcomer.register("gone.local"))[0] == grpc.StatusCode.OK
    finally:
        for client in (stranger, newcomer):
            await client.close()
        await again.stop(grace=0)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("not json", "is not a host state file (not JSON"),
        ('{"format": 99, "workers": {}, "aids": {}, "services": {}, "groups": {}}', "is not a host state file of format 1"),
        ('{"format": 1, "workers": {}, "aids": {}, "services": {}, "groups": {"g": {"mode": "broadcast"}}}', "holds an entry this host cannot read"),
    ],
)
async def test_a_file_that_is_not_a_host_state_file_is_refused_with_what_it_is(tmp_path: Path, text: str, said: str) -> None:
    state = tmp_path / "host.state"
    state.write_text(text)
    host = Process(["host", "--address", "127.0.0.1:0", "--state", str(state)])
    assert host.finish() == 2  # a configuration error (see aun_runtime.operating._stopping)
    assert f"error: --state: {state} {said}" in host.output and "Traceback" not in host.output
    assert state.read_text() == text  # left as it was
    for _ in range(2):  # the second time too: a refused file's lock is let go of, not held
        with pytest.raises(HostStateError, match=said.replace("(", r"\(")):
            AUNHost("127.0.0.1:0", state=state)
