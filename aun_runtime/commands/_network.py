"""`aun-runtime run APP --gateway-url URL`: an application's agents, served on the AUN network.

With a gateway configured (`--gateway-url`, or `AUN_GATEWAY_URL`), `run` starts the
application, gives its agents AUN identities through a [`GatewayAgent`][aun_runtime.network.GatewayAgent], and keeps serving
until SIGINT or SIGTERM, since messages may arrive from the network at any time. Then it stops
the gateway agent (what waits in the outbox stays for the next start) and prints the transcript and
counters, or, with `--json`, one JSON line per event (`serving`, then `connected` or
`failed` for each exposed AID, and `stopped`) for supervisors and tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from aun_runtime import AUNRuntime

from ..base._errors import ConfigurationError
from ..network._client_logs import CLIENT_LOG_ENV, CLIENT_LOG_LEVELS, client_log_level, set_client_log_level
from ..network._config import DEFAULT_DATA_DIR, ENV_URL, GatewayAgentConfig, split_aids
from ..network._errors import GatewayAgentError
from ..network._gateway_agent import GatewayAgent
from ..network._link import LinkState
from ..operating._metrics import ModelMetrics, RuntimeMetrics
from ..operating._probes import Readiness, serving_probes
from ..operating._stopping import STOP_GRACE, StopRequest, run_command
from ._app import App, AppRun

__all__ = ["add_client_log_option", "add_network_options", "network_requested", "quiet_client_logs", "run_on_network"]

Summary = Callable[[AUNRuntime, str], None]
DISCOVER = "discover"


def add_network_options(parser: argparse.ArgumentParser) -> None:
    """The options of `run` that put the application's agents on the AUN network."""
    group = parser.add_argument_group("AUN network (the gateway agent)")
    group.add_argument(
        "--gateway-url",
        default=None,
        help=f"the AUN gateway to join, e.g. ws://127.0.0.1:20001/aun, or '{DISCOVER}' for AUN discovery "
        f"(default: ${ENV_URL}); with it, run serves until Ctrl-C",
    )
    group.add_argument(
        "--gateway-data", default=None, help=f"keys, tokens and the outbox (default: ./{DEFAULT_DATA_DIR})"
    )
    group.add_argument(
        "--expose", action="append", default=None, metavar="AID[,AID]",
        help="local AIDs to put on the network (default: every AID of the runtime's domain)",
    )
    group.add_argument("--root-ca", default=None, help="an extra trusted root (the local gateway's pki/root.pem)")
    group.add_argument(
        "--domain", default=None,
        help="the runtime's AID domain (default: the issuer the gateway announces, else 'local')",
    )
    group.add_argument("--plaintext", action="store_true", help="send direct and group messages without end-to-end encryption")
    group.add_argument("--json", action="store_true",
                       help="print the gateway agent's lifecycle events as JSON lines instead of the transcript (needs --gateway-url)")
    add_client_log_option(group)


def add_client_log_option(parser: Any) -> None:
    """`--client-log-level`: how much of the AUN client's own logging reaches stderr."""
    parser.add_argument(
        "--client-log-level", default=None, choices=CLIENT_LOG_LEVELS,
        help=f"what the AUN client itself prints on stderr (default: ${CLIENT_LOG_ENV}, else warnings and "
        "errors, and only errors from its agent.md store); debug shows everything",
    )


def network_requested(args: argparse.Namespace) -> bool:
    """True if `run` was asked to join a gateway (by option or environment)."""
    import os

    return bool(getattr(args, "gateway_url", None) or os.environ.get(ENV_URL))


def quiet_client_logs(args: argparse.Namespace) -> str | None:
    """Set the AUN client's stderr level from `--client-log-level` or the environment; the level
    asked for (None: the default)."""
    level = client_log_level(getattr(args, "client_log_level", None))
    set_client_log_level(level)
    return level


def run_on_network(app: App, args: argparse.Namespace, summary: Summary) -> int:
    """Run `app` with its agents on the network until SIGINT/SIGTERM; 2 on a configuration error."""
    quiet_client_logs(args)
    try:
        return run_command(lambda stop: _serve(stop, app, args, summary), serving=True)
    except (OSError, ValueError) as exc:  # a gateway URL or data directory it cannot use
        raise ConfigurationError(str(exc)) from exc


def _emit(args: argparse.Namespace, event: str, **fields: Any) -> None:
    if args.json:
        print(json.dumps({"event": event, **fields}), flush=True)


async def _serve(stop: StopRequest, app: App, args: argparse.Namespace, summary: Summary) -> int:
    url = args.gateway_url
    config = GatewayAgentConfig.from_env(
        gateway_url=None if url == DISCOVER else url,
        data_dir=args.gateway_data,
        expose=split_aids(args.expose) if args.expose else None,
        root_ca_path=args.root_ca,
        encrypt=False if args.plaintext else None,
        client_log_level=client_log_level(getattr(args, "client_log_level", None)),
    )
    domain = args.domain or await announced_issuer(config.gateway_url) or "local"
    runtime = AUNRuntime(archive=args.archive, domain=domain)
    gateway = GatewayAgent(runtime, config)
    readiness = Readiness()
    readiness.require("gateway", lambda: _not_connected(gateway))
    async with serving_probes(args, readiness, [ModelMetrics(), RuntimeMetrics(runtime)]):
        return await _served(stop, app, args, summary, runtime, gateway, readiness, domain, config)


def _not_connected(gateway: GatewayAgent) -> str | None:
    """What `/readyz` says while an exposed AID is not connected to the network (None: all are)."""
    states = gateway.states()
    if not states:
        return "no AID on the network yet"
    away = sorted(f"{aid} {state.value}" for aid, state in states.items() if state is not LinkState.CONNECTED)
    return ", ".join(away) or None


async def _served(
    stop: StopRequest, app: App, args: argparse.Namespace, summary: Summary, runtime: AUNRuntime,
    gateway: GatewayAgent, readiness: Readiness, domain: str, config: GatewayAgentConfig,
) -> int:
    await runtime.start()
    watchers: list[asyncio.Task[None]] = []
    console: Any = None
    run = AppRun(app, runtime)
    served = False
    try:
        if getattr(args, "console", False):  # watch the network traffic live, as any run
            from ..console import Console

            console = Console(runtime, host=args.host, port=args.port, allow_send=args.allow_send)
            url = await console.start()
            _emit(args, "console", url=url)
            if not args.json:
                print(f"console: {url}", flush=True)
        # The route is there before the application runs: what its agents say first goes out too.
        await gateway.start()
        if await run.setup(stop):  # else it raised (printed) or a signal came first: nothing to serve
            served = True
            readiness.started()
            await gateway.expose_registered()
            _emit(args, "serving", domain=domain, exposed=gateway.exposed(), archive=args.archive,
                  outbox=str(config.outbox_path), waiting=gateway.stats.waiting)
            for aid in gateway.exposed():
                watchers.append(asyncio.create_task(_announce_connected(gateway, aid, args)))
            if not args.json:
                print(f"serving {', '.join(gateway.exposed()) or 'no AIDs'} on the AUN network; stop with Ctrl+C",
                      flush=True)
            await stop.wait()
    finally:
        for watcher in watchers:
            watcher.cancel()
        if console is not None:
            await console.stop()
        stats = gateway.stats
        # The runtime's turns get their grace first, while the link is up: what they send goes
        # out, or waits in the outbox for the next start.
        await runtime.stop(grace=STOP_GRACE)
        await gateway.stop()
    _emit(args, "stopped", stats=stats.__dict__, runtime=runtime.stats.__dict__)
    if served and not args.json:
        summary(runtime, args.archive)
    runtime.archive.close()
    return stop.exit_code(failed=run.failed)


async def _announce_connected(gateway: GatewayAgent, aid: str, args: argparse.Namespace) -> None:
    try:
        await gateway.wait_connected([aid])
    except GatewayAgentError as exc:
        _emit(args, "failed", aid=aid, error=str(exc))
        print(f"error: {exc}", file=sys.stderr, flush=True)
    else:
        _emit(args, "connected", aid=aid)


async def announced_issuer(gateway_url: str | None, timeout: float = 3.0) -> str | None:
    """The issuer domain a gateway announces at `/.well-known/aun-gateway` (the local gateway
    does), or None if it says none or cannot be asked."""
    if not gateway_url:
        return None
    import aiohttp

    parts = urlsplit(gateway_url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(f"{scheme}://{parts.netloc}/.well-known/aun-gateway") as response,
        ):
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    issuer = body.get("issuer") if isinstance(body, dict) else None
    return issuer if isinstance(issuer, str) and issuer else None
