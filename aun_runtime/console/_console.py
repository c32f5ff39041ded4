"""`Console`: serves the console page for a runtime in this process, or for an archive file."""

from __future__ import annotations

import ipaddress
import logging
import os
from types import TracebackType

from aiohttp import web
from prometheus_client import CollectorRegistry

from ..api._runtime import AUNRuntime
from ..operating._bad_requests import BadRequestLog
from ..operating._metrics import ModelMetrics, RuntimeMetrics
from ..operating._probes import BusyReport, Readiness, add_probe_routes, no_agents
from ..storage._archive import Archive
from ..storage._open import as_location, shown_location
from ._feed import DEFAULT_POLL_INTERVAL, ArchiveFeed
from ._routes import ConsoleState, build_app

__all__ = ["DEFAULT_BACKLOG", "DEFAULT_HOST", "Console"]

logger = logging.getLogger("aun_runtime.console")

#: Loopback only: the console shows every message and thought, and has no login.
DEFAULT_HOST = "127.0.0.1"
#: How many of the newest records a freshly opened page starts with. Older ones stay in the
#: archive; this bounds what one page load costs the server and the browser on a long-lived runtime.
DEFAULT_BACKLOG = 5000


class Console:
    """A web view of the live message flow, drawn the way AUN asks clients to draw it.

    Args:
        source: an [`AUNRuntime`][aun_runtime.AUNRuntime] in this process, an [`Archive`][aun_runtime.Archive],
            or the path of an archive file that another process writes (opened read-only, and
            waited for if it does not exist yet). Any process that writes the archive schema can be
            watched this way, a gateway included.
        host: the address to listen on. Default: loopback only.
        port: the TCP port; 0 picks a free one (see [`url`][aun_runtime.gateway.GatewayServer.url] once started).
        allow_send: let the page send as a local agent, through that agent's send tools. Needs a
            runtime in this process. Off by default: a console is for looking.
        poll_interval: seconds between two looks at the archive.
        backlog: how many of the newest records a freshly opened page starts with.

    Example:
        ```python
        async with AUNRuntime() as runtime, Console(runtime) as console:
            print("console at", console.url)
            ...  # register agents, send messages: the page follows live
        ```
    """

    def __init__(
        self,
        source: AUNRuntime | Archive | str | os.PathLike[str],
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        allow_send: bool = False,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        backlog: int = DEFAULT_BACKLOG,
    ) -> None:
        if backlog < 1:
            raise ValueError("backlog must be at least 1")
        self.runtime: AUNRuntime | None = source if isinstance(source, AUNRuntime) else None
        #: What `/readyz` answers: ready once it serves (a command adds its own conditions).
        self.readiness = Readiness()
        if allow_send and self.runtime is None:
            raise ValueError(
                "allow_send needs the runtime in this process (Console(runtime, allow_send=True)); "
                "a console that follows an archive can only watch"
            )
        if isinstance(source, AUNRuntime):
            runtime = source
            self.source = f"runtime in process {os.getpid()} (archive {runtime.archive.shown})"
            self._feed = ArchiveFeed(lambda: runtime.archive, poll_interval=poll_interval)
        elif isinstance(source, Archive):
            archive = source
            self.source = f"archive {archive.shown}"
            self._feed = ArchiveFeed(lambda: archive, poll_interval=poll_interval)
        else:
            path = as_location(source)
            self.source = f"archive {shown_location(path)} (read-only)"
            self._feed = ArchiveFeed(lambda: Archive(path, read_only=True), poll_interval=poll_interval)
        self._owns_archive = not isinstance(source, AUNRuntime | Archive)
        self.host = host
        self.port = port
        self.allow_send = allow_send
        self.backlog = backlog
        self._runner: web.AppRunner | None = None
        self._bad_requests = BadRequestLog()

    async def __aenter__(self) -> Console:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """The address the console listens on, once started."""
        if self._runner is None:
            raise RuntimeError("the console is not started")
        for address in self._runner.addresses:
            return str(address[0]), int(address[1])
        raise RuntimeError("the console has no listening socket")

    @property
    def url(self) -> str:
        """The page's address, once started."""
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    async def start(self) -> str:
        """Listen, start following the archive, and return the page's URL."""
        if self._runner is not None:
            return self.url
        state = ConsoleState(
            feed=self._feed,
            runtime=self.runtime,
            allow_send=self.allow_send,
            backlog=self.backlog,
            source=self.source,
        )
        # Open event streams end when the feed closes; a second is plenty for the rest to finish.
        # Malformed HTTP (no Host header, a bad request line) is answered 400 and logged a line a minute at most.
        self._bad_requests = BadRequestLog()
        app = build_app(state)
        # The probes of a long-running process, on the console's own port (see the docs' page Operating).
        registry = CollectorRegistry(auto_describe=True)
        registry.register(ModelMetrics())
        busy: BusyReport | None = None
        if self.runtime is not None:
            metrics = RuntimeMetrics(self.runtime)
            registry.register(metrics)
            busy = metrics.busy_report
        add_probe_routes(app, self.readiness, registry, busy or no_agents)
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0, logger=self._bad_requests
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        host, port = self.address
        if _is_loopback(host):
            # Only names of this machine may reach a loopback console (no DNS rebinding).
            names = ("127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host)
            state.allowed_hosts = frozenset(f"{name}:{port}" for name in names)
        else:
            logger.warning(
                "the console listens on %s: anyone who can reach it sees every message%s",
                host,
                ", and may send as any local agent" if self.allow_send else "",
            )
        self._feed.start()
        self.readiness.started()
        return self.url

    async def stop(self) -> None:
        """Stop serving (open pages are told, then disconnected). Idempotent."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        await self._feed.close()
        await runner.cleanup()
        self._bad_requests.close()
        if self._owns_archive and self._feed.archive is not None:
            self._feed.archive.close()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
