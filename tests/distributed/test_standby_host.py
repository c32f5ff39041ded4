"""Two hosts on one PostgreSQL state: one serves, the other stands by and serves when the first dies.

The database, each host, two instances of a service AID and a sender run each in a network
namespace of its own; the workers are given both hosts' addresses. The serving host is killed with
SIGKILL in the middle of the stream, and nobody starts anything again: the standby is elected, the
workers reconnect to it, and every message is handled exactly once. Then that host's database
session is ended: it stops serving (deposed), is elected again, and the stream goes on.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

from aun_runtime.testing.infrastructure import PostgresServer, PrivateNetwork

from .processes import (
    Process,
    received_texts,
    shared_received_texts,
    start_standby_hosts,
    start_worker,
    wait_until,
)

SERVICE_APPS = "tests.distributed.service_apps"
AID = "svc.local"
HOST_PORT = 50051
#: One message every 80 ms, about 24 s in all.
STREAM = 300
#: Seconds without a new handling that the test tolerates across the host's death: the standby's
#: election (0.5 s), the workers' reconnection (2 s at most between tries) and room for a busy machine.
LONGEST_GAP = 15.0


def test_a_standby_host_serves_when_the_serving_host_dies_and_every_message_is_handled_once(
    private_network: PrivateNetwork, procs: list[Process], tmp_path: Path
) -> None:
    machines = {label: private_network.add(label) for label in ("db", "h1", "h2", "a", "b", "sender")}
    db = machines["db"]
    server = PostgresServer(host=db.address, port=5432, prefix=db.command([])).start()
    try:
        url = server.url("postgres")
        hosts, both = start_standby_hosts(machines, url, HOST_PORT, procs)  # h1 serves, h2 stands by
        for label in ("a", "b"):
            procs.append(start_worker(
                both, f"{SERVICE_APPS}:instance", url, env={"TALLY_DELAY": "0.02", "HOME": str(tmp_path)},
                extra=["--name", label, "--service", f"{AID}=round_robin"], prefix=machines[label].command([]),
            ))  # fmt: skip
        sender_db = tmp_path / "sender.sqlite"
        env = {"SOURCE_COUNT": str(STREAM), "SOURCE_BURST": "1", "SOURCE_PAUSE": "0.08"}
        procs.append(start_worker(both, f"{SERVICE_APPS}:sender", sender_db, env=env, prefix=machines["sender"].command([])))

        wait_until(lambda: len(received_texts(sender_db)) >= 80, timeout=120, what="the stream under way")
        hosts["h1"].proc.send_signal(signal.SIGKILL)
        hosts["h1"].proc.wait()
        killed_at = len(shared_received_texts(server))
        assert killed_at < STREAM - 100, "the kill must land in the middle of the stream"
        hosts["h2"].wait_for_line(lambda line: "aun-runtime host ready on" in line, timeout=30)

        # Deposed: the serving host's session ends (as when it is cut off from the database). It
        # stops serving at once and stands by; the lock free, it is elected again, and serves.
        wait_until(lambda: len(shared_received_texts(server)) >= killed_at + 30, timeout=60, what="the stream through the standby")
        ended = server.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = 4281679"
        )
        assert ended.split() == ["t"]
        hosts["h2"].wait_for_line(lambda line: "deposed" in line, timeout=30)
        hosts["h2"].wait_for_line(lambda line: "aun-runtime host ready on" in line, timeout=30)

        last_change, seen, longest = time.monotonic(), -1, 0.0
        while len(set(shared_received_texts(server))) < STREAM or len(set(received_texts(sender_db))) < STREAM:
            now, count = time.monotonic(), len(shared_received_texts(server)) + len(received_texts(sender_db))
            if count != seen:
                seen, last_change = count, now
            longest = max(longest, now - last_change)
            assert now - last_change < 60, f"the stream stopped at {len(shared_received_texts(server))} handled"
            time.sleep(0.2)
        time.sleep(1)  # anything handled twice would show by now
        handled, replies = Counter(shared_received_texts(server)), Counter(received_texts(sender_db))
        assert sorted(handled) == sorted(str(n) for n in range(STREAM)) and set(handled.values()) == {1}
        assert set(replies.values()) == {1} and len(replies) == STREAM
        assert longest < LONGEST_GAP
        assert len(shared_received_texts(server)) > killed_at + 50  # handled through the standby
    finally:
        for process in procs:
            process.kill()
        server.stop()
