"""The probes of a long-running command: `/healthz`, `/readyz` and `/metrics` over HTTP.

`--http HOST:PORT` (or `AUN_HTTP`) on `run`, `worker`, `host` and `gateway` serves them on their own
port; the console serves the same paths on its port. What an orchestrator (Kubernetes, compose,
a load balancer) and Prometheus expect:

* `GET /healthz`: 200 `ok` while the process's event loop answers (the answer is made on that
  loop, so a loop stuck in a handler that never awaits gets no answer, and the probe times out).
* `GET /readyz`: 200 once every condition the command declared holds (its storage open, its host
  linked, its agents registered, its gateway connected), else 503 with a JSON body that names what
  is missing: `{"ready": false, "missing": {"host": "not linked to 10.0.0.5:50051"}}`.
* `GET /metrics`: the Prometheus exposition format, read from the runtime's counters at scrape
  time (see `aun_runtime.operating._metrics`).
* `GET /busy`: each agent with a turn in flight or messages waiting (`AUNRuntime.busy()`, as JSON):
  what the metrics say in a few series, per agent. 404 from a process that runs no agents (`host`,
  `gateway`), and while a command has not opened its runtime yet.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

__all__ = [
    "DEFAULT_PROBE_HOST",
    "BusyReport",
    "ProbeServer",
    "Readiness",
    "add_http_option",
    "add_probe_routes",
    "no_agents",
    "parse_listen_address",
    "serving_probes",
]

#: The address `--http :PORT` listens on when it names no host: every interface, as a probe comes
#: from the orchestrator (the kubelet, another container), not from this machine.
DEFAULT_PROBE_HOST = "0.0.0.0"

#: A readiness condition: None when it holds, else what is missing, in a few words.
Condition = Callable[[], str | None]

#: What `/busy` reads: the busy agents as plain values (None: this process runs no agents, or not yet).
BusyReport = Callable[[], list[dict[str, Any]] | None]


def no_agents() -> None:
    """The `/busy` of a process that runs no agents."""


class Readiness:
    """The conditions a command is ready under, each named (`storage`, `host`, `agents`, `gateway`).

    A command declares its conditions as it starts; until one is declared the command is not
    ready (`starting`), so a probe never sees a half-started process as ready.
    """

    def __init__(self) -> None:
        self._conditions: dict[str, Condition] = {}
        self._started = False

    def require(self, name: str, condition: Condition) -> None:
        """Ready only while `condition()` returns None; else it says what is missing under `name`."""
        self._conditions[name] = condition

    def started(self) -> None:
        """The command has declared all its conditions (it has started)."""
        self._started = True

    def missing(self) -> dict[str, str]:
        """What is missing, by condition; empty when ready."""
        missing: dict[str, str] = {} if self._started else {"start": "the command is still starting"}
        for name, condition in self._conditions.items():
            try:
                what = condition()
            except Exception as exc:  # a condition that cannot be read is not met
                what = f"{type(exc).__name__}: {exc}"
            if what is not None:
                missing[name] = what
        return missing


def add_probe_routes(
    app: web.Application, readiness: Readiness, registry: CollectorRegistry, busy: BusyReport = no_agents
) -> None:
    """Serve `/healthz`, `/readyz`, `/metrics` and `/busy` from `app`."""

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        missing = readiness.missing()
        body = json.dumps({"ready": not missing, "missing": missing})
        return web.Response(text=body + "\n", status=503 if missing else 200, content_type="application/json")

    async def metrics(request: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def busy_agents(request: web.Request) -> web.Response:
        report = busy()
        if report is None:
            return web.json_response({"error": "this process runs no agents (or has not opened its runtime yet)"},
                                     status=404)
        return web.json_response({"busy": report})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/busy", busy_agents)


def parse_listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (or `:PORT`, every interface) as a pair.

    Raises:
        SystemExit: not an address (one line, exit 2).
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise SystemExit(f"error: --http {text!r}: give HOST:PORT, e.g. 0.0.0.0:9090 or :9090 (port 0: any free port)")
    return host.strip("[]") or DEFAULT_PROBE_HOST, int(port)


class ProbeServer:
    """The probes of one process on their own port (`--http`).

    Args:
        address: `HOST:PORT` to listen on (port 0 picks a free one; see `port`).
        readiness: the command's readiness conditions.
        collectors: what `/metrics` reads, at each scrape.
    """

    def __init__(self, address: str, readiness: Readiness, collectors: list[Collector]) -> None:
        self.host, self.port = parse_listen_address(address)
        self.readiness = readiness
        self.registry = CollectorRegistry(auto_describe=True)
        self._runner: web.AppRunner | None = None
        #: What `/busy` serves, once the command has a runtime.
        self.busy: BusyReport = no_agents
        for collector in collectors:
            self.add(collector)

    def add(self, collector: Collector, *, busy: BusyReport | None = None) -> None:
        """Serve `collector`'s metrics too; `busy` (a runtime's metrics' `busy_report`), when given, is
        what `/busy` serves from now on."""
        self.registry.register(collector)
        if busy is not None:
            self.busy = busy

    def remove(self, collector: Collector) -> None:
        """Stop serving `collector`'s metrics (a worker that rejoins serves its new run's)."""
        self.registry.unregister(collector)

    async def start(self) -> str:
        """Listen; the base URL (with the port picked, if 0 was asked)."""
        app = web.Application()
        add_probe_routes(app, self.readiness, self.registry, lambda: self.busy())
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise SystemExit(
                f"error: --http cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None
        self._runner = runner
        if self.port == 0:
            self.port = int(runner.addresses[0][1])
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def add_http_option(parser: argparse.ArgumentParser) -> None:
    """`--http HOST:PORT`: serve this command's probes and metrics there."""
    parser.add_argument(
        "--http", default=None, metavar="HOST:PORT",
        help="serve /healthz, /readyz and /metrics on HOST:PORT (:PORT: every interface; port 0: any free port)",
    )


@contextlib.asynccontextmanager
async def serving_probes(
    args: argparse.Namespace, readiness: Readiness, collectors: list[Collector] | None = None
) -> AsyncIterator[ProbeServer | None]:
    """Serve the probes of a command while it runs, if it was given `--http` (else yield None)."""
    address = getattr(args, "http", None)
    if not address:
        yield None
        return
    server = ProbeServer(address, readiness, collectors or [])
    url = await server.start()
    log = logging.getLogger("aun_runtime.probes")
    log.setLevel(logging.INFO)  # where they are is worth a line whatever the log level
    log.info("probes on %s (/healthz, /readyz, /metrics, /busy)", url)
    try:
        yield server
    finally:
        await server.stop()
