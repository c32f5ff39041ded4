"""A frozen instance of a service AID loses its claims to its partner while it is frozen.

A process stopped with SIGSTOP keeps its PostgreSQL session (its kernel still answers the server's
keepalives) and its link to the host (the same): only its lease, renewed by its own event loop,
and the host's own pings tell that it has stopped. Its partner must take its claims within the
lease's bound, while it is still frozen; woken, it must find itself fenced, commit nothing, and
rejoin by itself. The database, the host, the two instances and the sender each run in a network
namespace of their own, and nobody starts anything again.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

from aun_runtime.testing.infrastructure import PostgresServer, PrivateNetwork

from .processes import Process, query, shared_received_texts, start_host, start_worker, wait_until

SERVICE_APPS = "tests.distributed.service_apps"
AID = "svc.local"
HOST_PORT = 50051
#: One message every 80 ms, about 24 s in all.
STREAM = 300
#: Seconds per handling: a little more than the sender's pace, so the holder has claims in hand.
HANDLING = "0.1"
#: Seconds the holder stays frozen: twice the lease (5 s), so that the takeover lands inside it.
FROZEN = 10.0
#: Seconds without a new handling that the test tolerates across the freeze: the lease (5 s), the
#: host's pings (3 s) and room for a machine busy with other work; without a takeover the stream
#: would stand still for the whole freeze and then some.
LONGEST_GAP = 15.0


def _holder(server: PostgresServer) -> str | None:
    """The instance holding the sender's stream, once it has claims in hand (it is behind)."""
    out = server.sql(
        "SELECT instance FROM svc_claims WHERE aid = 'svc.local' AND done = 0 GROUP BY instance HAVING COUNT(*) >= 3"
    ).split()
    return out[0] if len(out) == 1 else None


def test_a_frozen_instance_loses_its_claims_to_its_partner_and_rejoins_when_it_wakes(
    private_network: PrivateNetwork, procs: list[Process], tmp_path: Path
) -> None:
    machines = {label: private_network.add(label) for label in ("db", "host", "a", "b", "sender")}
    db = machines["db"]
    server = PostgresServer(host=db.address, port=5432, prefix=db.command([])).start()
    try:
        url = server.url("postgres")
        address = f"{machines['host'].address}:{HOST_PORT}"
        host, _ = start_host(address, extra=["--state", str(tmp_path / "host.state")], prefix=machines["host"].command([]))
        procs.append(host)
        instances = {
            label: start_worker(
                address, f"{SERVICE_APPS}:instance", url,
                env={"TALLY_DELAY": HANDLING, "HOME": str(tmp_path)},
                extra=["--name", label, "--service", f"{AID}=sender_affinity"],
                prefix=machines[label].command([]),
            )
            for label in ("a", "b")
        }
        procs.extend(instances.values())
        sender_db = tmp_path / "sender.sqlite"
        env = {"SOURCE_COUNT": str(STREAM), "SOURCE_BURST": "1", "SOURCE_PAUSE": "0.08"}
        procs.append(start_worker(address, f"{SERVICE_APPS}:sender", sender_db, env=env, prefix=machines["sender"].command([])))

        wait_until(lambda: len(shared_received_texts(server)) >= 40, timeout=120, what="the stream under way")
        found: list[str] = []  # the holder as seen when found (it may catch up a moment later)

        def held() -> bool:
            found[:] = [h] if (h := _holder(server)) else []
            return bool(found)

        wait_until(held, timeout=60, what="an instance with claims in hand")
        frozen = found[0]
        partner = "b" if frozen == "a" else "a"
        instances[frozen].proc.send_signal(signal.SIGSTOP)
        frozen_at, handled_at_freeze = time.monotonic(), len(shared_received_texts(server))
        assert handled_at_freeze < STREAM - 100, "the freeze must land in the middle of the stream"
        taken_at: float | None = None
        while time.monotonic() - frozen_at < FROZEN:
            if taken_at is None and any(f"from the dead instance {frozen}" in line for line in instances[partner].lines):
                taken_at = time.monotonic() - frozen_at
            time.sleep(0.1)
        handled_while_frozen = len(shared_received_texts(server)) - handled_at_freeze
        instances[frozen].proc.send_signal(signal.SIGCONT)
        # Taken over while it was still frozen, and the stream went on meanwhile.
        assert taken_at is not None, instances[partner].output + "\n" + host.output
        assert handled_while_frozen >= 10, f"only {handled_while_frozen} handled during the freeze"
        print(f"claims taken {taken_at:.1f} s after the freeze; {handled_while_frozen} handled while frozen")

        # Woken, it finds its session ended (fenced) and rejoins in its own process.
        wait_until(lambda: any("rejoined" in line for line in instances[frozen].lines), timeout=60, what="the rejoin")
        last_change, seen, longest = time.monotonic(), -1, 0.0
        while len(shared_received_texts(server)) < STREAM or len(query(sender_db, "SELECT 1 FROM archive WHERE owner = 'source.local' AND kind = 'received'")) < STREAM:
            now, count = time.monotonic(), len(shared_received_texts(server))
            if count != seen:
                seen, last_change = count, now
            longest = max(longest, now - last_change)
            assert now - last_change < 60, f"the stream stopped at {count}"
            time.sleep(0.2)
        time.sleep(1)  # anything handled twice would show by now
        handled = shared_received_texts(server)
        assert handled == [str(n) for n in range(STREAM)]  # each exactly once, in the sender's order
        replies = Counter(
            str(text) for (text,) in query(
                sender_db, "SELECT json_extract(body, '$.payload.text') FROM archive WHERE owner = 'source.local' AND kind = 'received'"
            )
        )  # fmt: skip
        assert sorted(replies.values()) == [1] * STREAM  # one reply each
        assert longest < LONGEST_GAP
        for label, process in instances.items():
            assert process.proc.poll() is None, f"instance {label} exited: {process.output}"
    finally:
        for process in procs:
            process.kill()
        server.stop()
