"""A worker whose handler blocks its event loop gets nothing routed to it until its loop runs again.

gRPC answers the host's keepalive pings on its own threads, so a blocked event loop looks alive
to them; only the worker's heartbeats, sent from its event loop, tell the host that it has stopped
(see `aun_runtime.distributed._heartbeat`). Without them the host would keep routing, under
`round_robin`, every other message to the blocked instance, and each of them would wait there for
its sender's resend (5 s without an acknowledgement, doubling), so replies would stall for much of
the block. With them the host drops the blocked worker within `HEARTBEAT_TIMEOUT`, its partner
gets every message, and the blocked one connects again when it wakes.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from aun_runtime.testing.infrastructure import PostgresServer

from .processes import Process, received_texts, start_host, start_worker, wait_until

SERVICE_APPS = "tests.distributed.service_apps"
AID = "svc.local"
#: One message every 80 ms, about 16 s in all.
STREAM = 200
#: The message from which instance "a" blocks its loop, and for how long.
BLOCK_FROM = 40
BLOCK_SECONDS = 18.0
#: Seconds the oldest unanswered message may wait across the block: the heartbeat's bound (5 s), then
#: the sender's resend on the service's new epoch, and room for a busy machine. Without the
#: heartbeat what was routed to the blocked instance waits there for most of the block, round after
#: round of resends (5 s, doubling) of which each may land on it again.
LONGEST_GAP = 12.0


def _answered_through(replies: list[str]) -> int:
    """How many messages from the first on are all answered: what the sender has seen done in order."""
    answered = set(replies)
    n = 0
    while f"done {n}" in answered:
        n += 1
    return n


def test_a_blocked_event_loop_gets_nothing_routed_to_it_until_it_runs_again(procs: list[Process], tmp_path: Path) -> None:
    server = PostgresServer().start()
    try:
        url = server.url("postgres")
        host, address = start_host()
        procs.append(host)
        blocking = {"BLOCK_FROM": str(BLOCK_FROM), "BLOCK_SECONDS": str(BLOCK_SECONDS)}
        instances = {
            label: start_worker(
                address, f"{SERVICE_APPS}:{app}", url, env={"TALLY_DELAY": "0.02", "HOME": str(tmp_path), **env},
                extra=["--name", label, "--service", f"{AID}=round_robin"],
            )
            for label, app, env in (("a", "blocking_instance", blocking), ("b", "instance", {}))
        }
        procs.extend(instances.values())
        sender_db = tmp_path / "sender.sqlite"
        env = {"SOURCE_COUNT": str(STREAM), "SOURCE_BURST": "1", "SOURCE_PAUSE": "0.08"}
        procs.append(start_worker(address, f"{SERVICE_APPS}:sender", sender_db, env=env))

        wait_until(lambda: any("blocking the event loop" in line for line in instances["a"].lines), timeout=120, what="the block")
        last_change, seen, longest = time.monotonic(), -1, 0.0
        while _answered_through(received_texts(sender_db)) < STREAM:
            now, count = time.monotonic(), _answered_through(received_texts(sender_db))
            if count != seen:
                seen, last_change = count, now
            longest = max(longest, now - last_change)
            assert now - last_change < 60, f"no reply for message {count}\n{host.output}"
            time.sleep(0.2)
        time.sleep(1)  # anything handled twice would show by now
        handled = Counter(server.sql(
            "SELECT body::json->'payload'->>'text' FROM archive WHERE owner = 'svc.local' AND kind = 'received'"
        ).split())  # fmt: skip
        assert handled == Counter(str(n) for n in range(STREAM))  # each handled exactly once
        assert Counter(received_texts(sender_db)) == Counter(f"done {n}" for n in range(STREAM))  # one reply each
        print(f"longest wait of the oldest unanswered message: {longest:.1f} s")
        assert longest < LONGEST_GAP, host.output
        assert any("no heartbeat" in line for line in host.lines), host.output
        for label, process in instances.items():
            assert process.proc.poll() is None, f"instance {label} exited: {process.output}"
    finally:
        for process in procs:
            process.kill()
        server.stop()
