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
import json
import logging
import sys

from protocols.aun import ROUND_ROBIN

from ..distributed._busy_status import ask_busy
from ..distributed._host import DEFAULT_HOST_ADDRESS, AUNHost
from ..distributed._host_election import ElectedHostState
from ..distributed._host_metrics import host_metrics
from ..distributed._tls import HostTLS, TLSConfig
from ..operating._command_errors import address
from ..operating._metrics import ModelMetrics
from ..operating._probes import Readiness, add_http_option, serving_probes
from ..operating._stopping import StopRequest, run_command
from ..storage import dialect_for
from ._table import Command
from ._worker_serving import first_of, serve_worker

__all__ = ["HOST", "STATUS", "WORKER"]

logger = logging.getLogger("aun_runtime.distributed")


def _host_options(host: argparse.ArgumentParser) -> None:
    host.add_argument(
        "--address",
        type=address,
        default=DEFAULT_HOST_ADDRESS,
        help=f"host:port to bind (default {DEFAULT_HOST_ADDRESS}; port 0 picks one)",
    )
    host.add_argument(
        "--state",
        help="the host's state file: worker names, AID ownership, service AIDs and groups survive a restart"
        " (default: kept in memory only); or a postgresql://... database several hosts share: one is elected"
        " to serve, the others stand by",
    )
    host.add_argument("--tls-cert", help="PEM certificate chain: serve TLS")
    host.add_argument("--tls-key", help="PEM private key of --tls-cert")
    host.add_argument("--tls-client-ca", help="PEM CA that must sign worker certificates (mutual TLS)")
    add_http_option(host)


def _worker_options(worker: argparse.ArgumentParser) -> None:
    worker.add_argument(
        "--host", type=_hosts, default=DEFAULT_HOST_ADDRESS,
        help=f"the host's host:port (default {DEFAULT_HOST_ADDRESS}), or several hosts' comma-separated"
        " (hosts sharing a postgresql:// --state: the worker reconnects to whichever serves)",
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
    add_http_option(worker)


def _status_options(status: argparse.ArgumentParser) -> None:
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


def _hosts(text: str) -> str:
    """An argparse type: one `host:port`, or several, comma-separated."""
    return ",".join(address(part.strip()) for part in text.split(","))


def _logging() -> None:
    logging.getLogger("aun_runtime.distributed").setLevel(logging.INFO)
    logging.getLogger("autogen_core").setLevel(logging.WARNING)


def _run_host(args: argparse.Namespace) -> int:
    _logging()
    if bool(args.tls_cert) != bool(args.tls_key):
        raise SystemExit("error: --tls-cert and --tls-key go together")
    tls = HostTLS(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None

    async def serve(stop: StopRequest) -> int:
        if args.state and dialect_for(args.state).shared:  # the hosts elect the one that serves
            return await _serve_elected(stop, args, tls)
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


async def _serve_elected(stop: StopRequest, args: argparse.Namespace, tls: HostTLS | None) -> int:
    """A host whose state is in the shared database: it stands by until elected, serves until its
    session ends (deposed: it stops serving at once) or it is stopped, and stands by again."""
    readiness = Readiness()
    serving = False
    readiness.require("host", lambda: None if serving else "standing by: another host serves")
    async with serving_probes(args, readiness, []) as probes:
        readiness.started()
        while True:
            state = ElectedHostState(args.state)
            elected, _ = await stop.unless_stopped(state.elect())
            if not elected:
                state.close()
                return stop.exit_code(failed=False)
            host = AUNHost(args.address, tls=tls, state=state)
            metrics = host_metrics(host)
            if probes is not None:
                probes.add(metrics)
            await host.open()
            serving = True
            print(f"aun-runtime host ready on {host.address}{' (TLS)' if tls else ''}", flush=True)
            await first_of(stop.wait(), state.lost.wait())
            serving = False
            await host.stop(grace=1)
            if probes is not None:
                probes.remove(metrics)
            if stop.requested:
                logger.info("host: stopped; %s", " ".join(f"{k}={v}" for k, v in host.stats.__dict__.items()))
                return stop.exit_code(failed=False)
            logger.warning("host: deposed (its database session ended): it stopped serving, and stands by")


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

    from ..distributed._wire import DIRECTORY_SERVICE, decode_json, encode_json

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


def _service(spec: str) -> tuple[str, str]:
    aid, _, policy = spec.partition("=")
    return aid, policy or ROUND_ROBIN


def _run_worker(args: argparse.Namespace) -> int:
    from ._app import load_app

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
            return await serve_worker(stop, args, app, tls, services, readiness, probes)

    return run_command(serve, serving=True)


#: `aun-runtime host`, `aun-runtime worker` and `aun-runtime status`.
HOST = Command("host", help="serve the host of a cluster of workers", options=_host_options, run=_run_host)
WORKER = Command("worker", help="run an app's agents as a worker of a host", options=_worker_options, run=_run_worker)
STATUS = Command("status", help="print a host's counters and directory as JSON", options=_status_options,
                 run=_run_status)
