"""What `/metrics` shows of a host and of a worker: their own counters, read at each scrape."""

from __future__ import annotations

from ..operating._metrics import CountersCollector
from ._host import AUNHost
from ._worker import WorkerRuntime

__all__ = ["host_metrics", "worker_metrics"]


def host_metrics(host: AUNHost) -> CountersCollector:
    """The host's workers and routing (`aun_host_*`)."""
    return CountersCollector(lambda: host.stats, [
        ("aun_host_workers", "gauge", "Workers connected now.", lambda s: s.workers_connected),
        ("aun_host_routed", "counter", "Messages the host routed to a worker.", lambda s: s.events_routed),
        ("aun_host_not_delivered", "counter", "Messages the host had no worker for.", lambda s: s.not_delivered),
        ("aun_host_connects", "counter", "Worker connections accepted.", lambda s: s.connects),
        ("aun_host_disconnects", "counter", "Worker connections that ended.", lambda s: s.disconnects),
        ("aun_host_registrations", "counter", "AID registrations accepted.", lambda s: s.registrations),
        ("aun_host_refused", "counter", "Calls, streams and acknowledgements refused.",
         lambda s: s.refused + s.rpc_refused + s.acks_refused),
    ])


def worker_metrics(worker: WorkerRuntime) -> CountersCollector:
    """The worker's link to its host and its at-least-once traffic (`aun_worker_*`)."""
    return CountersCollector(lambda: worker.stats, [
        ("aun_worker_connected", "gauge", "1 while the worker is linked to its host.", lambda s: int(s.connected)),
        ("aun_worker_reconnects", "counter", "Times the worker tried its host again after a session ended.",
         lambda s: s.reconnects),
        ("aun_worker_sent", "counter", "Messages the worker sent to the host.", lambda s: s.sent),
        ("aun_worker_resent", "counter", "Messages sent again (not acknowledged in time).", lambda s: s.resent),
        ("aun_worker_handled", "counter", "Deliveries the worker handled.", lambda s: s.handled),
        ("aun_worker_unacknowledged", "gauge", "Sent messages not acknowledged yet.", lambda s: s.unacknowledged),
    ])
