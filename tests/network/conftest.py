"""Fixtures for the bridge tests: a local gateway (in this process or as a subprocess), runtimes with
a gateway agent (in this process, or ``aun-runtime run`` subprocesses), and plain AUN clients.

A plain client is the ``fastaun`` library alone, pointed at the gateway through its own per-AID
``gateway_url`` metadata and trusting the gateway's development root: no aun-runtime code.
Subprocesses get free ports at run time, are watched through the JSON lines they print, and are
always killed in teardown.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aun_core import AIDStore, AUNClient
from aun_core.keystore.local_identity_store import LocalIdentityStore
from aun_core.logger import NullLogger

from aun_runtime import Archive, AUNAgent, AUNMessage, AUNRuntime, MessageContext, RecordKind, event
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent, GatewayAgentConfig, quiet_client

REPO = Path(__file__).resolve().parents[2]
SEED = "bridge-test-seed"
_names = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}{next(_names):03d}"


@dataclass(frozen=True)
class GatewayInfo:
    """What a client needs of a gateway (an in-process server or a subprocess)."""

    url: str
    issuer: str
    root_ca_path: str


def info_of(server: GatewayServer) -> GatewayInfo:
    return GatewayInfo(server.url, server.issuer, str(server.root_ca_path))


# -- plain AUN clients -----------------------------------------------------------------------------


def inbox_named(name: str) -> Callable[[AUNRuntime], Awaitable[None]]:
    """What `bridged` runs on its runtime to expose an inbox as `name` in the gateway's domain."""

    async def register(runtime: AUNRuntime) -> None:
        await runtime.open_inbox(f"{name}.{runtime.domain}")

    return register


def agent_named(name: str, agent_class: type[AUNAgent]) -> Callable[[AUNRuntime], Awaitable[None]]:
    """What `bridged` runs on its runtime to register `agent_class` as `name` in the gateway's domain."""

    async def register(runtime: AUNRuntime) -> None:
        await runtime.register_agent(f"{name}.{runtime.domain}", agent_class)

    return register


class Gate(AUNAgent):
    """Holds a message whose text is "first" until released: what comes next waits in the mailbox meanwhile."""

    release: asyncio.Event

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.text == "first":
            await type(self).release.wait()


class PlainClient:
    """A real AUN client and what it received, in order."""

    def __init__(self, client: AUNClient) -> None:
        self.client = client
        self.aid: str = client.aid or ""
        self.direct: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.group: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        client.on("message.received", self.direct.put_nowait)
        client.on("group.message_created", self.group.put_nowait)

    async def send(self, to: str, payload: dict[str, Any], **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.call("message.send", {"to": to, "payload": payload, **params})
        return result

    async def next(self, timeout: float = 20.0) -> dict[str, Any]:
        return await asyncio.wait_for(self.direct.get(), timeout)

    async def take(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        return [await self.next(timeout) for _ in range(count)]


async def plain_client(gateway: GatewayInfo, home: Path, name: str, *, connect: bool = True) -> PlainClient:
    aid = f"{name}.{gateway.issuer}"
    path = home / name
    LocalIdentityStore(str(path), encryption_seed=SEED, logger=NullLogger()).set_metadata_value(aid, "gateway_url", gateway.url)
    store = AIDStore(path, SEED, root_ca_path=gateway.root_ca_path, logger=NullLogger())
    if not store.load(aid).ok:
        registered = await store.register(aid, type="agent")
        assert registered.ok, registered.error
    loaded = store.load(aid)
    assert loaded.ok and loaded.data is not None
    client = PlainClient(quiet_client(AUNClient, loaded.data["aid"], "error"))
    if connect:
        await client.client.connect({"auto_reconnect": True, "retry_initial_delay": 0.2, "retry_max_delay": 1.0})
    return client


@pytest.fixture
async def plain_clients(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[PlainClient]]]:
    made: list[PlainClient] = []

    async def make(gateway: GatewayInfo, name: str, *, connect: bool = True) -> PlainClient:
        client = await plain_client(gateway, tmp_path / "plain", name, connect=connect)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.client.close()


# -- in-process gateway and runtimes ---------------------------------------------------------------


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[GatewayServer]:
    async with GatewayServer("127.0.0.1", port=0, data_dir=tmp_path / "gateway") as server:
        yield server


def agent_config(gateway: GatewayInfo, data_dir: Path, **options: Any) -> GatewayAgentConfig:
    return GatewayAgentConfig(
        data_dir=data_dir, gateway_url=gateway.url, root_ca_path=gateway.root_ca_path, seed=SEED,
        reconnect_max_delay=0.5, **options,
    )


@pytest.fixture
async def bridged(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]]:
    """``runtime, agent = await bridged(gateway, "r1", register)``: a started runtime in the gateway's
    domain, ``register(runtime)`` run on it, and a started gateway agent exposing its AIDs."""
    made: list[tuple[AUNRuntime, GatewayAgent]] = []

    async def make(
        gateway: GatewayInfo, name: str, register: Callable[[AUNRuntime], Awaitable[None]], **options: Any
    ) -> tuple[AUNRuntime, GatewayAgent]:
        runtime_options = {key: options.pop(key) for key in ("max_hops", "mailbox_capacity", "overflow") if key in options}
        runtime = AUNRuntime(archive=tmp_path / f"{name}.sqlite", domain=gateway.issuer, **runtime_options)
        await runtime.start()
        await register(runtime)
        agent = GatewayAgent(runtime, agent_config(gateway, tmp_path / name, **options))
        made.append((runtime, agent))
        await agent.start()
        await asyncio.wait_for(agent.wait_connected(), 60)
        return runtime, agent

    yield make
    for runtime, agent in made:
        await agent.stop()
        await runtime.close()


async def eventually(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Wait until ``check()`` holds, looking every 20 ms (for state with no event: archives, files)."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


# -- subprocesses ----------------------------------------------------------------------------------


class Child:
    """A subprocess whose JSON stdout lines are collected by a thread, for waiting on events."""

    def __init__(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.process = subprocess.Popen(
            args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # Offline models only: the stand-ins answer, whatever the developer's shell configures.
            env={**{k: v for k, v in os.environ.items() if not k.startswith("AUN_")}, **(env or {})},
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> dict[str, Any]:
        """The first line (seen before or arriving within ``timeout``) that satisfies ``predicate``."""
        for line in self.seen:
            if predicate(line):
                return line
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                if self.process.poll() is not None:
                    raise AssertionError(f"{self.name} exited ({self.process.returncode}): {''.join(self.stderr)[-3000:]}") from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.name}: timed out; stderr: {''.join(self.stderr)[-3000:]}") from None
                await asyncio.sleep(0.02)
                continue
            self.seen.append(line)
            if predicate(line):
                return line

    async def connected(self, *aids: str, timeout: float = 60.0) -> None:
        """Wait for the runtime's ``connected`` line for each AID (failing fast on ``failed``)."""
        for aid in aids:
            line = await self.wait_for(lambda line, aid=aid: line.get("aid") == aid and line["event"] in ("connected", "failed"), timeout)
            assert line["event"] == "connected", line

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)

    def terminate(self, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


class Children:
    """Starts gateway and runtime subprocesses; kills every one of them in teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[Child] = []

    async def gateway(self, data: Path, port: int = 0) -> tuple[Child, GatewayInfo, int]:
        child = Child("gateway", [sys.executable, "-m", "aun_runtime", "gateway", "--port", str(port),
                                  "--data", str(data), "--json"])
        self.started.append(child)
        line = await child.wait_for(lambda line: "gateway_url" in line)
        port = int(line["gateway_url"].rsplit(":", 1)[1].split("/")[0])
        return child, GatewayInfo(line["gateway_url"], line["issuer"], line["root_ca_path"]), port

    def runtime(
        self, name: str, gateway: GatewayInfo, app: dict[str, Any], app_spec: str = "tests.network.apps:app",
        extra: tuple[str, ...] = (),
    ) -> Child:
        args = [
            sys.executable, "-m", "aun_runtime", "run", app_spec, "--json",
            "--gateway-url", gateway.url, "--root-ca", gateway.root_ca_path, "--domain", gateway.issuer,
            "--gateway-data", str(self.tmp_path / name), "--archive", str(self.archive(name)), *extra,
        ]
        env = {"BRIDGE_APP": json.dumps(app), "AUN_GATEWAY_SEED": SEED, "AUN_GATEWAY_RECONNECT_MAX_DELAY": "0.5"}
        child = Child(name, args, env)
        self.started.append(child)
        return child

    def archive(self, name: str) -> Path:
        return self.tmp_path / f"{name}.sqlite"

    def kill_all(self) -> None:
        for child in self.started:
            child.kill()


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Children]:
    spawned = Children(tmp_path)
    yield spawned
    spawned.kill_all()


def read_archive(path: Path) -> Archive:
    return Archive(path, read_only=True)


def committed(runtime: AUNRuntime, aid: str) -> list[AUNMessage]:
    """What `aid` received, as another process reading the archive file sees it: what is committed."""
    reader = read_archive(runtime.archive.path)  # type: ignore[arg-type]
    try:
        return [r.message for r in reader.history(aid, kinds=[RecordKind.RECEIVED], limit=100) if r.message]
    finally:
        reader.close()
