"""Benchmark: how long a failover takes, with real processes in network namespaces of their own.

* **A frozen instance.** A service AID (`sender_affinity`) on two instances whose journals and
  ledger are in one PostgreSQL database, a host with a state file, and a sender of one message
  every 80 ms. The instance that holds the stream, with claims in hand, is frozen with SIGSTOP:
  seconds from the freeze to its partner logging that it took one of its claims.
* **A dead host.** Two hosts sharing their state in the database (one serves, one stands by),
  two instances (`round_robin`) and the sender given both addresses. The serving host is killed
  with SIGKILL: seconds from the kill to the standby serving (its `ready` line), and to the
  sender's first reply after the kill (which crossed the standby).

Each part runs `--repeat` times; the JSON line gives every run and the medians. As root only (it
makes network namespaces); elsewhere it says why and stops.

    python bench/failover.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aun_runtime.testing.infrastructure import PostgresServer, PrivateNetwork, namespaces_unavailable
from tests.distributed.processes import (
    Process,
    query,
    start_host,
    start_standby_hosts,
    start_worker,
    wait_until,
)

APPS = "tests.distributed.service_apps"
AID = "svc.local"
PORT = 50051
SENDER = {"SOURCE_COUNT": "400", "SOURCE_BURST": "1", "SOURCE_PAUSE": "0.08"}


def _replies(sender_db: Path) -> int:
    rows = query(sender_db, "SELECT COUNT(*) FROM archive WHERE owner = 'source.local' AND kind = 'received'")
    return int(rows[0][0]) if rows else 0


def _until(check: Callable[[], bool], timeout: float = 60.0) -> float:
    """Seconds until `check()` holds (polled every 20 ms)."""
    start = time.monotonic()
    wait_until(check, timeout=timeout, what="the failover")
    return time.monotonic() - start


def frozen_instance(network: PrivateNetwork, directory: Path) -> float:
    machines = {label: network.add(label) for label in ("db", "host", "a", "b", "sender")}
    server = PostgresServer(host=machines["db"].address, port=5432, prefix=machines["db"].command([])).start()
    procs: list[Process] = []
    try:
        url = server.url("postgres")
        host, address = start_host(f"{machines['host'].address}:{PORT}", extra=["--state", str(directory / "host.state")],
                                   prefix=machines["host"].command([]))  # fmt: skip
        procs.append(host)
        instances = {}
        for label in ("a", "b"):
            instances[label] = start_worker(
                address, f"{APPS}:instance", url, env={"TALLY_DELAY": "0.1", "HOME": str(directory)},
                extra=["--name", label, "--service", f"{AID}=sender_affinity"], prefix=machines[label].command([]),
            )  # fmt: skip
            procs.append(instances[label])
        procs.append(start_worker(address, f"{APPS}:sender", directory / "sender.sqlite", env=SENDER,
                                  prefix=machines["sender"].command([])))  # fmt: skip

        def holder() -> str | None:
            out = server.sql(
                "SELECT instance FROM svc_claims WHERE aid = 'svc.local' AND done = 0 GROUP BY instance HAVING COUNT(*) >= 3"
            ).split()
            return out[0] if len(out) == 1 else None

        found: list[str] = []  # the holder as seen when found (it may catch up a moment later)

        def held() -> bool:
            found[:] = [h] if (h := holder()) else []
            return bool(found)

        wait_until(held, timeout=120, what="an instance with claims in hand")
        frozen = found[0]
        partner = instances["b" if frozen == "a" else "a"]
        instances[frozen].proc.send_signal(signal.SIGSTOP)
        try:
            return _until(lambda: any(f"from the dead instance {frozen}" in line for line in partner.lines))
        finally:
            instances[frozen].proc.send_signal(signal.SIGCONT)
    finally:
        for process in procs:
            process.kill()
        server.stop()


def dead_host(network: PrivateNetwork, directory: Path) -> tuple[float, float]:
    machines = {label: network.add(label) for label in ("db", "h1", "h2", "a", "b", "sender")}
    server = PostgresServer(host=machines["db"].address, port=5432, prefix=machines["db"].command([])).start()
    procs: list[Process] = []
    try:
        url = server.url("postgres")
        hosts, both = start_standby_hosts(machines, url, PORT, procs)  # h1 serves, h2 stands by
        for label in ("a", "b"):
            procs.append(start_worker(
                both, f"{APPS}:instance", url, env={"TALLY_DELAY": "0.02", "HOME": str(directory)},
                extra=["--name", label, "--service", f"{AID}=round_robin"], prefix=machines[label].command([]),
            ))  # fmt: skip
        sender_db = directory / "sender.sqlite"
        procs.append(start_worker(both, f"{APPS}:sender", sender_db, env=SENDER, prefix=machines["sender"].command([])))
        wait_until(lambda: _replies(sender_db) >= 60, timeout=120, what="the stream under way")
        before = _replies(sender_db)
        hosts["h1"].proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        hosts["h2"].wait_for_line(lambda line: "aun-runtime host ready on" in line, timeout=60)
        serving = time.monotonic() - killed
        wait_until(lambda: _replies(sender_db) > before + 1, timeout=60, what="a reply through the standby")
        return serving, time.monotonic() - killed
    finally:
        for process in procs:
            process.kill()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    reason = namespaces_unavailable()
    if reason is not None:
        raise SystemExit(f"failover: needs network namespaces: {reason}")
    freezes, hosts = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as directory, PrivateNetwork() as network:
            freezes.append(frozen_instance(network, Path(directory)))
        with tempfile.TemporaryDirectory() as directory, PrivateNetwork() as network:
            hosts.append(dead_host(network, Path(directory)))
    print(json.dumps({
        "freeze_to_takeover_s": [round(x, 2) for x in freezes],
        "freeze_to_takeover_median_s": round(statistics.median(freezes), 2),
        "host_death_to_standby_serving_s": [round(s, 2) for s, _ in hosts],
        "host_death_to_standby_serving_median_s": round(statistics.median(s for s, _ in hosts), 2),
        "host_death_to_reply_through_standby_s": [round(r, 2) for _, r in hosts],
        "host_death_to_reply_through_standby_median_s": round(statistics.median(r for _, r in hosts), 2),
    }))


if __name__ == "__main__":
    main()
