"""`aun-runtime host` and `aun-runtime worker`: a cluster from the command line.

`aun-runtime host --address 127.0.0.1:50051 --state host.state` serves until SIGINT/SIGTERM,
keeping who owns what in its state file across restarts. `aun-runtime worker
--host 127.0.0.1:50051 --app module:function` connects, runs the app (an `async def app(runtime)`
that registers agents and groups, exactly as for `aun-runtime run`), then serves until SIGINT or
SIGTERM; `--service AID[=POLICY]` makes it one instance of the service AID `AID`. Both print one
`ready` line on stdout once they serve (scripts wait for it) and log one line per lifecycle event
on stderr. `aun-runtime status --host ...` prints the host's counters and directory as JSON,
with each service AID's policy and instances (`live` or `away`) under `services`, and with
`--busy HOST:PORT` the busy agents of the processes whose probes are there, under `busy`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from typing import Any, cast

from protocols.aun import ROUND_ROBIN

from .._actor_tracing import tracing_provider
from .._command_errors import address
from .._errors import ConfigurationError, StorageSessionLostError
from .._metrics import ModelMetrics, RuntimeMetrics
from .._probes import ProbeServer, Readiness, serving_probes
from .._stopping import STOP_GRACE, StopRequest, run_command
from .._storage_wait import open_when_available
from ._busy_status import ask_busy
from ._host import DEFAULT_HOST_ADDRESS, AUNHost
from ._host_metrics import host_metrics, worker_metrics
from ._tls import HostTLS, TLSConfig
from ._worker import WorkerRuntime

__all__ = ["add_commands"]

logger = logging.getLogger("aun_runtime.distributed")


def add_commands(commands: Any) -> None:
    """Add the `host` and `worker` subcommands to the `aun-runtime` parser."""
    host = commands.add_parser("host", help="serve the host of a cluster of workers")
    host.add_argument(
        "--address",
        type=address,
        default=DEFAULT_HOST_ADDRESS,
        help=f"host:port to bind (default {DEFAULT_HOST_ADDRESS}; port 0 picks one)",
    )
    host.add_argument(
        "--state",
        help="the host's state file: worker names, AID ownership, service AIDs and groups survive a restart"
        " (default: kept in memory only)",
    )
    host.add_argument("--tls-cert", help="PEM certificate chain: serve TLS")
    host.add_argument("--tls-key", help="PEM private key of --tls-cert")
    host.add_argument("--tls-client-ca", help="PEM CA that must sign worker certificates (mutual TLS)")
    host.set_defaults(run=_run_host)

    worker = commands.add_parser("worker", help="run an app's agents as a worker of a host")
    worker.add_argument(
        "--host", type=address, default=DEFAULT_HOST_ADDRESS, help=f"the host's host:port (default {DEFAULT_HOST_ADDRESS})"
    )
    worker.add_argument(
        "--app", required=True, help="module:function registering the agents, e.g. agents.demo:app"
    )
    worker.add_argument(
        "--archive",
        default=":memory:",
        help="SQLite file, or postgresql://... URL of the database several machines share, for archive and"
        " journal (durable worker)",
    )
    worker.add_argument(
        "--name", help="worker name (default: kept in the archive file; needed with a postgresql:// archive)"
    )
    worker.add_argument("--tls-ca", help="PEM CA (or self-signed certificate) to trust: connect with TLS")
    worker.add_argument("--tls-cert", help="PEM client certificate (mutual TLS)")
    worker.add_argument("--tls-key", help="PEM key of --tls-cert")
    worker.add_argument("--tls-server-name", help="name to check the host certificate against")
    worker.add_argument(
        "--connect-timeout", type=float, default=30.0,
        help="seconds to wait at start for the archive's database and then the host (not ready meanwhile)",
    )
    worker.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="AID[=POLICY]",
        help="hold AID as one instance of a service AID (POLICY: round_robin, the default, or sender_affinity)",
    )
    worker.add_argument(
        "--service-ledger",
        metavar="DIR_OR_URL",
        help="where the ledgers of --service AIDs are: a directory of SQLite ledgers the instances on one machine"
        " share (default: the archive's), or the archive's postgresql://... database for instances on several"
        " machines (the default with a postgresql:// archive)",
    )
    worker.add_argument("--service-dir", help=argparse.SUPPRESS)  # the earlier name of --service-ledger DIR
    worker.set_defaults(run=_run_worker)

    status = commands.add_parser("status", help="print a host's counters and directory as JSON")
    status.add_argument(
        "--host", type=address, default=DEFAULT_HOST_ADDRESS, help=f"the host's host:port (default {DEFAULT_HOST_ADDRESS})"
    )
    status.add_argument("--tls-ca", help="PEM CA to trust: connect with TLS")
    status.add_argument("--tls-server-name", help="name to check the host certificate against")
    status.add_argument(
        "--busy", type=address, action="append", default=[], metavar="HOST:PORT",
        help="also print the busy agents of the process whose probes (--http) are at HOST:PORT: a worker's, run's"
        " (repeat it for each)",
    )
    status.set_defaults(run=_run_status)


def _logging() -> None:
    logging.getLogger("aun_runtime.distributed").setLevel(logging.INFO)
    logging.getLogger("autogen_core").setLevel(logging.WARNING)


def _run_host(args: argparse.Namespace) -> int:
    _logging()
    if bool(args.tls_cert) != bool(args.tls_key):
        raise SystemExit("error: --tls-cert and --tls-key go together")
    tls = HostTLS(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None

    async def serve(stop: StopRequest) -> int:
        host = AUNHost(args.address, tls=tls, state=args.state)  # a state file it cannot use: exit 2
        readiness = Readiness()
        serving = False
        readiness.require("host", lambda: None if serving else "the host is not serving")
        async with serving_probes(args, readiness, [host_metrics(host)]):
            await host.open()
            serving = True
            readiness.started()
            print(f"aun-runtime host ready on {host.address}{' (TLS)' if tls else ''}", flush=True)
            return await _host_served(stop, host)

    return run_command(serve, serving=True)


async def _host_served(stop: StopRequest, host: AUNHost) -> int:
    if host.state_path is None:
        logger.warning("host: no --state file: worker names and AID ownership are forgotten when it restarts")
    else:
        logger.info("host: state in %s", host.state_path)
    await stop.wait()
    await host.stop(grace=1)
    logger.info("host: stopped; %s", " ".join(f"{k}={v}" for k, v in host.stats.__dict__.items()))
    return stop.exit_code(failed=False)


def _run_status(args: argparse.Namespace) -> int:
    import grpc

    from ._wire import DIRECTORY_SERVICE, decode_json, encode_json

    async def ask() -> int:
        if args.tls_ca:
            tls = TLSConfig(args.tls_ca, server_name=args.tls_server_name)
            channel = grpc.aio.secure_channel(
                args.host, tls.channel_credentials(), options=tls.channel_options()
            )
        else:
            channel = grpc.aio.insecure_channel(args.host)
        call = channel.unary_unary(
            f"/{DIRECTORY_SERVICE}/Stats", request_serializer=encode_json, response_deserializer=decode_json
        )
        try:
            answer = await call({}, timeout=5)
        except grpc.aio.AioRpcError as exc:
            print(f"error: no answer from {args.host}: {exc.code().name}: {exc.details()}", file=sys.stderr)
            return 1
        finally:
            await channel.close()
        answered = True
        if args.busy:
            answer["busy"], answered = await ask_busy(args.busy)
        print(json.dumps(answer, indent=2, sort_keys=True))
        return 0 if answered else 1

    return asyncio.run(ask())


async def _first(*waits: Any) -> None:
    """Wait until the first of `waits` is done; cancel the others."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _service(spec: str) -> tuple[str, str]:
    aid, _, policy = spec.partition("=")
    return aid, policy or ROUND_ROBIN


def _run_worker(args: argparse.Namespace) -> int:
    from .._app import load_app

    _logging()
    tls = None
    if args.tls_ca:
        tls = TLSConfig(args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)
        tls.channel_credentials()  # its PEM files are read now: one it cannot read is refused before anything starts
    app = load_app(args.app)
    services = dict(_service(spec) for spec in args.service)

    async def serve(stop: StopRequest) -> int:
        readiness = Readiness()
        async with serving_probes(args, readiness, [ModelMetrics()]) as probes:
            return await _serve_worker(stop, args, app, tls, services, readiness, probes)

    return run_command(serve, serving=True)


async def _serve_worker(
    stop: StopRequest, args: argparse.Namespace, app: Any, tls: TLSConfig | None, services: dict[str, str],
    readiness: Readiness, probes: ProbeServer | None,
) -> int:
    from .._app import AppRun
    from . import worker_runtime

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
        # Both within the one connect timeout: the database first (started beside it, it may
        # not be up yet), then the host.
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
    if probes is not None:
        probes.add(RuntimeMetrics(runtime))
        probes.add(worker_metrics(core))
    run = AppRun(app, runtime)
    registered = False
    readiness.require("agents", lambda: None if registered else "the app is registering its agents")
    readiness.started()
    try:
        if await run.setup(stop):
            registered = True
            core.log_registered()
            print(f"aun-runtime worker {core.name} ready on {args.host}", flush=True)
            lost = core.session_lost
            await _first(stop.wait(), lost.wait())
            if lost.is_set():
                # Fenced: nothing more can be committed; the other instances take this one's
                # claims, and a restart settles the rest from the database.
                print(f"error: worker {core.name}: its database session ended; stopping", file=sys.stderr)
                run.failed = True
    finally:
        registered = False
        # A delivery still running after the grace is cancelled and left unacknowledged: the
        # host sends it again when this worker is back.
        try:
            await runtime.stop(grace=STOP_GRACE)
        except StorageSessionLostError as exc:  # what was not committed is sent again by its senders
            logger.error("worker %s: stopped without its last commit: %s", core.name, exc)
    logger.info("worker %s: %s", core.name, core.stats_line())
    with contextlib.suppress(StorageSessionLostError):
        runtime.archive.close()
    return stop.exit_code(failed=run.failed)
