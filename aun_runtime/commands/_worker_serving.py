"""`aun-runtime worker` from its start to its exit, riding out the loss of its database session.

A worker's journal session is its proof of life and its fence (`aun_runtime.storage._postgres`):
it is never reopened behind the worker's back, since a claim made on it may have passed to another
instance once it ended. So when it ends (the database restarted, the server cut the worker off, or
another instance fenced a worker that stopped renewing its lease), the worker does what a
supervisor would do, inside the same process: it stops the run whose session ended (nothing more of
it can be committed; the link to the host is closed, so that the host sees the worker away), then
opens its journal again as at start, waiting for the database with backoff, takes its lock back,
settles its claims from what its journal committed (those another instance took are that one's),
reconnects to the host and runs its app again. Its agents start afresh, as after a restart; what
was not committed is sent again by its senders and handled once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import time
from typing import Any, cast

from prometheus_client.registry import Collector

from ..base._errors import ConfigurationError, StorageSessionLostError
from ..core._actor_tracing import tracing_provider
from ..distributed._host_metrics import worker_metrics
from ..distributed._tls import TLSConfig
from ..distributed._worker import WorkerRuntime
from ..operating._metrics import RuntimeMetrics
from ..operating._probes import ProbeServer, Readiness
from ..operating._stopping import STOP_GRACE, StopRequest
from ..storage._storage_wait import open_when_available

__all__ = ["serve_worker"]

logger = logging.getLogger("aun_runtime.distributed")


class _Lost(Exception):
    """The run's database session ended before it was stopped: the worker rejoins."""


async def first_of(*waits: Any) -> None:
    """Wait until the first of `waits` is done; cancel the others."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def serve_worker(
    stop: StopRequest, args: argparse.Namespace, app: Any, tls: TLSConfig | None, services: dict[str, str],
    readiness: Readiness, probes: ProbeServer | None,
) -> int:
    """Run the worker until stopped; its exit status. A lost database session is ridden out: the
    worker rejoins within `--connect-timeout` seconds of the loss (the same wait as at start)."""
    rejoining = False
    while True:
        try:
            return await _serve_once(stop, args, app, tls, services, readiness, probes, rejoining=rejoining)
        except _Lost as lost:
            logger.warning("worker %s: its database session ended; rejoining as soon as the database is back", lost)
            rejoining = True


async def _serve_once(
    stop: StopRequest, args: argparse.Namespace, app: Any, tls: TLSConfig | None, services: dict[str, str],
    readiness: Readiness, probes: ProbeServer | None, *, rejoining: bool,
) -> int:
    from ..distributed import worker_runtime
    from ._app import AppRun

    waited_for: dict[str, str | None] = {"storage": "opening the archive"}
    readiness.require("storage", lambda: waited_for["storage"])
    readiness.require("host", lambda: f"not linked to the host at {args.host}")
    started = time.monotonic()
    timeout = args.connect_timeout

    def opened() -> Any:
        return worker_runtime(
            args.host, archive=args.archive, name=args.name, tls=tls,
            connect_timeout=None if timeout is None else max(0.0, timeout - (time.monotonic() - started)),
            services=services, service_dir=args.service_ledger or args.service_dir,
            tracer_provider=tracing_provider(None),  # the one the OTEL_* environment installed, if any
        )

    try:
        # Both within the one connect timeout: the database first (started beside it, or coming
        # back from a restart, it may not be up yet), then the host.
        done, runtime = await stop.unless_stopped(
            open_when_available(opened, timeout, lambda why: waited_for.__setitem__("storage", why))
        )
        if not done or runtime is None:
            return stop.exit_code(failed=False)
        core = cast(WorkerRuntime, runtime.core)
        readiness.require("host", lambda: None if core.stats.connected else f"not linked to the host at {args.host}")
        linked, _ = await stop.unless_stopped(runtime.start())
        if not linked:  # stopped while it waited for its host: nothing was registered yet
            with contextlib.suppress(Exception):
                await core.stop()
            runtime.archive.close()
            return stop.exit_code(failed=False)
    except (ValueError, OSError) as exc:  # options that do not go together, a file it cannot read
        raise ConfigurationError(str(exc)) from exc
    # Anything else that stops it here is reported by the command line's one reporter: a database or
    # state it cannot use (exit 2), or a host that does not answer in time (exit 1).
    collectors: list[Collector] = []
    if probes is not None:  # the collectors are made only for a run that serves its probes
        metrics, worker = RuntimeMetrics(runtime), worker_metrics(core)
        collectors = [metrics, worker]
        probes.add(metrics, busy=metrics.busy_report)
        probes.add(worker)
    run = AppRun(app, runtime)
    registered = False
    lost = core.session_lost
    readiness.require("agents", lambda: None if registered else "the app is registering its agents")
    readiness.started()
    try:
        if await run.setup(stop):
            registered = True
            core.log_registered()
            if rejoining:
                logger.warning("worker %s: rejoined on %s", core.name, args.host)
            else:
                print(f"aun-runtime worker {core.name} ready on {args.host}", flush=True)
            await first_of(stop.wait(), lost.wait())
    finally:
        registered = False
        # A delivery still running after the grace is cancelled and left unacknowledged: the host
        # sends it again when this worker is back. A run whose session ended has nothing to wait
        # for: none of its handlings can be committed.
        try:
            await runtime.stop(grace=0 if lost.is_set() else STOP_GRACE)
        except StorageSessionLostError as exc:  # what was not committed is sent again by its senders
            logger.error("worker %s: stopped without its last commit: %s", core.name, exc)
        for collector in collectors:
            assert probes is not None
            probes.remove(collector)
    logger.info("worker %s: %s", core.name, core.stats_line())
    with contextlib.suppress(StorageSessionLostError):
        runtime.archive.close()
    if lost.is_set() and not stop.requested:
        raise _Lost(core.name)
    return stop.exit_code(failed=run.failed)
