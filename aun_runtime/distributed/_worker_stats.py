"""What a worker did, counted: one snapshot of its link, outbox, streams and deliveries.

Apart from the worker so that the counters have one home: `WorkerRuntime.stats` reads them, and
`/metrics` (`._host_metrics`) and the stop line in the log read that.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ._inbound import Inbound
from ._link import HostLink
from ._outbox import Outbox
from ._worker_delivery import DeliveryPath
from ._worker_services import ServiceInstances

__all__ = ["WorkerStats", "count_worker", "format_stats"]


@dataclass
class WorkerStats:
    """What the worker did, counted. `kept` is what waits for AIDs nobody holds now."""

    connected: bool = False
    sessions: int = 0
    reconnects: int = 0
    sent: int = 0
    resent: int = 0
    acknowledged: int = 0
    handled: int = 0
    duplicates_skipped: int = 0
    reordered: int = 0
    unacknowledged: int = 0
    kept: int = 0


def format_stats(stats: WorkerStats) -> str:
    """The counters as `name=value` pairs on one line (for the log)."""
    return " ".join(f"{k}={v}" for k, v in asdict(stats).items())


def count_worker(
    link: HostLink, outbox: Outbox, inbound: Inbound, deliveries: DeliveryPath, services: ServiceInstances
) -> WorkerStats:
    """The counters of a worker's parts, read now."""
    return WorkerStats(
        connected=link.connected,
        sessions=link.sessions,
        reconnects=link.reconnects,
        sent=outbox.sent,
        resent=outbox.resent,
        acknowledged=outbox.acked,
        handled=deliveries.handled,
        duplicates_skipped=inbound.duplicates + services.duplicates,
        reordered=inbound.reordered,
        unacknowledged=outbox.size,
        kept=sum(outbox.kept().values()),
    )
