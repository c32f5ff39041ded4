"""Every failure in one stream, and nobody starts anything again.

Two hosts on one PostgreSQL state, a service AID on two instances (`round_robin`, and
`sender_affinity` with the sender's order checked too) and a sender,
each in a network namespace of its own, 500 messages one every 80 ms: the serving host is killed
with SIGKILL after 100 replies, one instance is frozen with SIGSTOP for 20 s after 200, and the
database is stopped as a crash stops it after 300 and started again 3 s later. Every message is
handled exactly once, and replies never stop for more than 15 s.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from aun_runtime.testing.infrastructure import PostgresServer, PrivateNetwork

from .processes import Process, received_texts, start_standby_hosts, start_worker, wait_until

SERVICE_APPS = "tests.distributed.service_apps"
AID = "svc.local"
HOST_PORT = 50051
STREAM = 500
#: Seconds the sender may go without a reply: the issue's bound, over the lease (5 s), the host's
#: pings (3 s), a database restart (3 s down, then the rejoin) and a standby's election.
LONGEST_SILENCE = 15.0


class Silence:
    """The longest time the sender went without a new reply, watched from a thread of its own."""

    def __init__(self, sender_db: Path) -> None:
        self.longest = 0.0
        self._db = sender_db
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        seen, since = -1, time.monotonic()
        while not self._stop.is_set():
            count, now = len(received_texts(self._db)), time.monotonic()
            if count != seen:
                seen, since = count, now
            if count < STREAM:
                self.longest = max(self.longest, now - since)
            time.sleep(0.1)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.longest


@pytest.mark.parametrize("policy", ["round_robin", "sender_affinity"])
def test_a_host_kill_a_frozen_instance_and_a_database_crash_in_one_stream(
    private_network: PrivateNetwork, procs: list[Process], tmp_path: Path, policy: str
) -> None:
    machines = {label: private_network.add(label) for label in ("db", "h1", "h2", "a", "b", "sender")}
    db = machines["db"]
    server = PostgresServer(host=db.address, port=5432, prefix=db.command([]), durable=True).start()
    try:
        url = server.url("postgres")
        hosts, both = start_standby_hosts(machines, url, HOST_PORT, procs)  # h1 serves, h2 stands by
        instances = {}
        for label in ("a", "b"):
            instances[label] = start_worker(
                both, f"{SERVICE_APPS}:instance", url, env={"TALLY_DELAY": "0.02", "HOME": str(tmp_path)},
                extra=["--name", label, "--service", f"{AID}={policy}"], prefix=machines[label].command([]),
            )
            procs.append(instances[label])
        sender_db = tmp_path / "sender.sqlite"
        env = {"SOURCE_COUNT": str(STREAM), "SOURCE_BURST": "1", "SOURCE_PAUSE": "0.08"}
        sender = start_worker(both, f"{SERVICE_APPS}:sender", sender_db, env=env, prefix=machines["sender"].command([]))
        procs.append(sender)
        silence = Silence(sender_db)

        wait_until(lambda: len(received_texts(sender_db)) >= 100, timeout=120, what="100 replies")
        hosts["h1"].proc.send_signal(signal.SIGKILL)
        hosts["h2"].wait_for_line(lambda line: "aun-runtime host ready on" in line, timeout=30)

        wait_until(lambda: len(received_texts(sender_db)) >= 200, timeout=120, what="200 replies")
        instances["a"].proc.send_signal(signal.SIGSTOP)
        time.sleep(20)
        instances["a"].proc.send_signal(signal.SIGCONT)

        wait_until(lambda: len(received_texts(sender_db)) >= 300, timeout=120, what="300 replies")
        assert len(received_texts(sender_db)) < STREAM, "the crash must land in the middle of the stream"
        server.crash()
        time.sleep(3)
        server.start_again()

        wait_until(lambda: len(set(received_texts(sender_db))) >= STREAM, timeout=180, what="every reply")
        time.sleep(1)  # anything handled twice would show by now
        longest = silence.stop()
        in_order = server.sql(
            "SELECT body::json->'payload'->>'text' FROM archive WHERE owner = 'svc.local' AND kind = 'received' ORDER BY id"
        ).split()
        handled = Counter(in_order)
        assert sorted(handled, key=int) == [str(n) for n in range(STREAM)] and set(handled.values()) == {1}
        if policy == "sender_affinity":  # and in the sender's order
            assert in_order == [str(n) for n in range(STREAM)]
        assert set(Counter(received_texts(sender_db)).values()) == {1}
        assert longest < LONGEST_SILENCE, f"no reply for {longest:.1f} s"
        for process in [*instances.values(), sender, hosts["h2"]]:  # nobody exited, nobody was started again
            assert process.proc.poll() is None, process.output
        print(f"longest silence {longest:.1f} s")
    finally:
        for process in procs:
            process.kill()
        server.stop()
