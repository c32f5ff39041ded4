"""Service AIDs over the gRPC host, with real processes: one AID held by several workers at once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import grpc
import pytest

from .processes import Process, query, start_host, start_worker, wait_until
from .raw import RawClient, hello

APPS = "tests.distributed.service_apps"
AID = "svc.local"


def _instance(host: str, tmp_path: Path, n: int, policy: str, env: dict[str, str] | None = None) -> Process:
    return start_worker(
        host,
        f"{APPS}:instance",
        tmp_path / f"instance{n}.sqlite",
        env=env,
        extra=["--service", f"{AID}={policy}", "--service-dir", str(tmp_path)],
    )


def _sender(host: str, tmp_path: Path, aid: str, count: int, burst: int = 0, pause: float = 0.0) -> Process:
    env = {"SOURCE_AID": aid, "SOURCE_COUNT": str(count), "SOURCE_BURST": str(burst), "SOURCE_PAUSE": str(pause)}
    return start_worker(host, f"{APPS}:sender", tmp_path / f"{aid}.sqlite", env=env)


def _handled(archive: Path) -> list[tuple[str, str]]:
    """What the instance with this archive handled, in order: (sender, text)."""
    rows = query(
        archive,
        "SELECT from_aid, json_extract(body, '$.payload.text') FROM archive WHERE owner = ? AND kind = 'received' ORDER BY id",
        (AID,),
    )
    return [(str(f), str(t)) for f, t in rows]


def _replies(archive: Path, aid: str) -> list[str]:
    rows = query(
        archive, "SELECT json_extract(body, '$.payload.text') FROM archive WHERE owner = ? AND kind = 'received'", (aid,)
    )
    return [str(t) for (t,) in rows]


def _done(tmp_path: Path) -> int:
    rows = query(tmp_path / f"{AID}.service.sqlite", "SELECT COUNT(*) FROM svc_claims WHERE done = 1")
    return int(rows[0][0]) if rows else 0


def _name(worker: Process) -> str:
    line = worker.wait_for_line(lambda s: s.startswith("aun-runtime worker ") and " ready on " in s)
    return line.split()[2]


def _status(host: str) -> dict[str, object]:
    status = Process(["status", "--host", host])
    assert status.finish() == 0
    report: dict[str, object] = json.loads(status.output)
    return report


async def test_round_robin_gives_every_instance_a_share_and_each_message_is_handled_once(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    instances = [_instance(host, tmp_path, n, "round_robin") for n in range(3)]
    procs.extend(instances)
    count = 300
    source = tmp_path / "source.local.sqlite"
    procs.append(_sender(host, tmp_path, "source.local", count))
    wait_until(lambda: len(_replies(source, "source.local")) >= count, what="every reply")

    shares = [_handled(tmp_path / f"instance{n}.sqlite") for n in range(3)]
    assert all(len(share) >= count // 6 for share in shares), [len(s) for s in shares]
    handled = Counter(text for share in shares for _, text in share)
    assert handled == Counter(str(n) for n in range(count))  # each once, across the instances
    assert Counter(_replies(source, "source.local")) == Counter(f"done {n}" for n in range(count))

    report = _status(host)
    services = report["services"]
    assert isinstance(services, dict)
    [service] = services.values()
    assert service["policy"] == "round_robin"
    assert sorted(service["instances"].values()) == ["live", "live", "live"]


async def test_with_sender_affinity_each_senders_messages_are_handled_in_order_by_one_instance(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    procs.extend(_instance(host, tmp_path, n, "sender_affinity") for n in range(3))
    count, senders = 100, ["a.local", "b.local", "c.local"]
    for aid in senders:
        procs.append(_sender(host, tmp_path, aid, count, burst=10, pause=0.01))

    def replied() -> bool:
        return all(len(_replies(tmp_path / f"{aid}.sqlite", aid)) >= count for aid in senders)

    wait_until(replied, what="the replies to every sender")

    shares = [_handled(tmp_path / f"instance{n}.sqlite") for n in range(3)]
    for aid in senders:
        holders = [share for share in shares if any(sender == aid for sender, _ in share)]
        assert len(holders) == 1, f"{aid} reached {len(holders)} instances"
        assert [text for sender, text in holders[0] if sender == aid] == [str(n) for n in range(count)]
    assert sorted(len(share) for share in shares) == [count] * 3  # one sender per instance: the least loaded


@pytest.mark.parametrize(("policy", "stop"), [("round_robin", "SIGKILL"), ("sender_affinity", "SIGKILL"), ("round_robin", "SIGTERM")])
async def test_an_instance_killed_mid_stream_loses_nothing_and_nothing_is_handled_twice(
    host: str, procs: list[Process], tmp_path: Path, policy: str, stop: str
) -> None:
    slow = {"TALLY_DELAY": "0.002"}
    instances = [_instance(host, tmp_path, n, policy, slow) for n in range(3)]
    procs.extend(instances)
    count = 500
    source = tmp_path / "source.local.sqlite"
    procs.append(_sender(host, tmp_path, "source.local", count, burst=50, pause=0.05))
    archives = [tmp_path / f"instance{n}.sqlite" for n in range(3)]

    wait_until(lambda: _done(tmp_path) >= 120, what="the service to be well into the stream")
    # The instance that is handling (with sender affinity, the only one that gets the stream).
    victim = max(range(3), key=lambda n: len(_handled(archives[n])))
    if stop == "SIGKILL":
        instances[victim].proc.kill()  # no flush, no goodbye
        instances[victim].proc.wait()
    else:
        assert instances[victim].terminate() == 0  # a clean stop while handlers are running
    before = _handled(archives[victim])
    assert _done(tmp_path) < count, "the kill must land in the middle of the stream"

    wait_until(lambda: _done(tmp_path) >= count, timeout=90, what="every message handled by the others")
    instances_seen = _status(host)["services"][AID]["instances"]  # type: ignore[index]
    assert instances_seen == {_name(p): "away" if p is instances[victim] else "live" for p in instances}
    handled = Counter(text for archive in archives for _, text in _handled(archive))
    assert handled == Counter(str(n) for n in range(count))  # each exactly once, across all instances
    assert _handled(archives[victim]) == before  # the dead one did nothing more
    takers = [n for n in range(3) if n != victim and _handled(archives[n])]
    assert takers, "another instance took over"
    if policy == "sender_affinity":
        [taker] = takers
        texts = [int(text) for _, text in before + _handled(archives[taker])]
        assert texts == list(range(count))  # per-sender order held across the failover

    # What the killed instance had committed but not yet sent leaves once it is back.
    procs.append(_instance(host, tmp_path, victim, policy, slow))
    wait_until(lambda: len(_replies(source, "source.local")) >= count, timeout=90, what="every reply")
    assert Counter(_replies(source, "source.local")) == Counter(f"done {n}" for n in range(count))
    for archive in archives:
        assert not query(archive, "SELECT 1 FROM archive WHERE kind = 'dead_letter'")


async def test_a_new_instance_joining_takes_work(host: str, procs: list[Process], tmp_path: Path) -> None:
    procs.extend(_instance(host, tmp_path, n, "round_robin") for n in range(2))
    first, more = 100, 150
    source = tmp_path / "source.local.sqlite"
    env = {"SOURCE_COUNT": str(first), "SOURCE_MORE": str(more)}
    procs.append(start_worker(host, f"{APPS}:gated_sender", source, env=env))
    wait_until(lambda: len(_replies(source, "source.local")) >= first, what="the first round handled by two instances")
    procs.append(_instance(host, tmp_path, 2, "round_robin"))
    procs.append(start_worker(host, f"{APPS}:opener", tmp_path / "opener.sqlite"))  # the second round, now
    wait_until(lambda: len(_replies(source, "source.local")) >= first + more + 1, what="every reply")
    shares = [_handled(tmp_path / f"instance{n}.sqlite") for n in range(3)]
    assert len(shares[2]) >= more // 6, [len(s) for s in shares]  # about a third of the second round
    assert {int(text) for _, text in shares[2]} <= set(range(first, first + more))
    assert Counter(text for share in shares for _, text in share) == Counter(str(n) for n in range(first + more))


def _refused(host: str, tmp_path: Path, name: str, extra: list[str], *, code: int = 1) -> str:
    """Run a worker the host refuses (exit 1), or that refuses its own options (`code` 2); its output."""
    worker = Process(
        ["worker", "--host", host, "--app", f"{APPS}:instance", "--archive", str(tmp_path / f"{name}.sqlite"), *extra]
    )
    assert worker.finish() == code
    return worker.output


async def test_mixing_plain_and_service_registrations_or_policies_is_refused(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    service = ["--service-dir", str(tmp_path)]
    procs.append(_instance(host, tmp_path, 0, "round_robin"))
    output = _refused(host, tmp_path, "plain", [])
    assert f"{AID} is a service AID (round_robin)" in output
    output = _refused(host, tmp_path, "other", ["--service", f"{AID}=sender_affinity", *service])
    assert "policy round_robin, not sender_affinity" in output

    # A plain holder of an AID keeps it: nobody may make it a service AID.
    procs.append(start_worker(host, "tests.distributed.apps:sink", tmp_path / "sink.sqlite"))
    worker = Process(
        ["worker", "--host", host, "--app", "tests.distributed.apps:sink", "--archive", str(tmp_path / "x.sqlite"),
         "--service", "sink.local", *service]
    )
    assert worker.finish() == 1
    assert "sink.local is held as a plain AID by worker" in worker.output

    assert "unknown policy 'nearest'" in _refused(host, tmp_path, "bad", ["--service", f"{AID}=nearest", *service], code=2)
    # A worker that does not share the instances' ledger (so not its secret) is no instance.
    output = _refused(host, tmp_path, "elsewhere", ["--service", AID, "--service-dir", str(tmp_path / "elsewhere")])
    assert "not the secret of the service's instances" in output
    worker = Process(["worker", "--host", host, "--app", f"{APPS}:instance", "--service", AID])  # no archive
    assert worker.finish() == 2  # a configuration error
    assert "a service instance needs a durable archive" in worker.output


async def test_after_a_host_restart_the_instances_register_again_and_nothing_is_lost(
    procs: list[Process], tmp_path: Path
) -> None:
    host_process, address = start_host()
    procs.append(host_process)
    instances = [_instance(address, tmp_path, n, "round_robin") for n in range(2)]
    procs.extend(instances)
    count = 300
    source = tmp_path / "source.local.sqlite"
    procs.append(_sender(address, tmp_path, "source.local", count, burst=10, pause=0.02))
    wait_until(lambda: len(_replies(source, "source.local")) >= 30, what="traffic before the restart")
    host_process.kill()
    host_process.proc.wait()
    assert len(_replies(source, "source.local")) < count
    for instance in instances:
        instance.wait_for_line(lambda s: "reconnecting" in s)
    restarted, again = start_host(address)
    procs.append(restarted)
    assert again == address

    wait_until(lambda: len(_replies(source, "source.local")) >= count, timeout=90, what="every reply after the restart")
    assert Counter(_replies(source, "source.local")) == Counter(f"done {n}" for n in range(count))
    shares = [_handled(tmp_path / f"instance{n}.sqlite") for n in range(2)]
    assert Counter(text for share in shares for _, text in share) == Counter(str(n) for n in range(count))
    assert sorted(_status(address)["services"][AID]["instances"].values()) == ["live", "live"]  # type: ignore[index]


async def test_on_the_wire_a_bad_policy_a_missing_worker_name_or_another_secret_is_refused(host: str) -> None:
    worker = RawClient(host, "tester", "the tester's secret")
    anonymous = RawClient(host)
    intruder = RawClient(host, "intruder", "the intruder's own secret")
    try:
        worker.open()
        worker.send(hello("tester"))
        await worker.read()  # the directory snapshot: the stream is open
        worker.metadata += [("aun-service", "nearest"), ("aun-service-secret", "the service's secret")]
        code, details = await worker.register(AID)
        assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, "unknown service policy 'nearest'; one of round_robin, sender_affinity")
        anonymous.metadata.append(("aun-service", "round_robin"))
        code, details = await anonymous.register(AID)
        assert code == grpc.StatusCode.PERMISSION_DENIED and "only workers register its instances" in details
        worker.metadata[-2] = ("aun-service", "round_robin")
        assert (await worker.register(AID))[0] == grpc.StatusCode.OK
        anonymous.metadata.pop()
        code, details = await anonymous.register(AID)  # a plain registration of a service AID
        assert code == grpc.StatusCode.PERMISSION_DENIED and "only workers register its instances" in details

        intruder.open()
        intruder.send(hello("intruder"))
        await intruder.read()
        intruder.metadata.append(("aun-service", "round_robin"))
        code, details = await intruder.register(AID)
        assert code == grpc.StatusCode.PERMISSION_DENIED and "presents the service's secret" in details
        intruder.metadata.append(("aun-service-secret", "a guess"))
        code, details = await intruder.register(AID)
        assert code == grpc.StatusCode.PERMISSION_DENIED and "not the secret of the service's instances" in details
    finally:
        for client in (worker, anonymous, intruder):
            await client.close()


async def test_with_sender_affinity_a_new_instance_takes_the_next_new_sender(
    host: str, procs: list[Process], tmp_path: Path
) -> None:
    procs.extend(_instance(host, tmp_path, n, "sender_affinity") for n in range(2))
    count = 50
    for aid in ("a.local", "b.local"):
        procs.append(_sender(host, tmp_path, aid, count))
    wait_until(lambda: _done(tmp_path) >= 2 * count, what="the first two senders handled")
    procs.append(_instance(host, tmp_path, 2, "sender_affinity"))
    procs.append(_sender(host, tmp_path, "c.local", count))
    wait_until(lambda: _done(tmp_path) >= 3 * count, what="the third sender handled")
    assert [sender for sender, _ in _handled(tmp_path / "instance2.sqlite")] == ["c.local"] * count
