"""`aun-runtime demo --gateway`: the demo team on a local AUN gateway, asked by a plain AUN client.

It starts a local gateway ([`GatewayServer`][aun_runtime.gateway.GatewayServer]) on a free port, data in a
temporary directory, runs the network team (`agents.network:team`: the reflection team, an agent
that answers twice and one that stays silent) on a runtime in the gateway's domain, and exposes it
through a [`GatewayAgent`][aun_runtime.network.GatewayAgent]. Then a plain AUN client (the `fastaun`
library alone, as any AUN program would use it) registers `user.<issuer>` and writes to the team:
a coding task, a question for the agent that answers twice and one for the agent that answers
nothing. The transcript shows those messages arriving from outside, the team at work, and what went
back; then the client's own view. It exits by itself.

`run_gateway_demo` takes the application to serve, so the same scene runs any team with
`coder`, `twice` and `quiet` in the gateway's domain; `gateway_demo` runs it with the
network team, and is what this package declares as the `gateway` demo (entry point group
`aun_runtime.demo`) for `aun-runtime demo --gateway`.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aun_runtime import AUNRuntime, RecordKind
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent, GatewayAgentConfig, quiet_client
from protocols.reflection import CodingTaskMsg

from .network import team

__all__ = ["gateway_demo", "run_gateway_demo"]

#: How long the demo waits for the team's answers before it reports what it has, in seconds.
DEMO_TIMEOUT = 90.0
_SEED = "aun-runtime demo: a throwaway key store"

App = Callable[[AUNRuntime], Awaitable[None]]
Summary = Callable[[AUNRuntime, str], None]


async def gateway_demo(archive: str, summary: Summary) -> int:
    """`aun-runtime demo --gateway`: the scene, with the network team."""
    return await run_gateway_demo(team, archive, summary)


async def run_gateway_demo(app: App, archive: str, summary: Summary) -> int:
    """Run the scene; print the transcript, the counters and the plain client's view."""
    with tempfile.TemporaryDirectory(prefix="aun-demo-") as scratch:
        root = Path(scratch)
        async with GatewayServer("127.0.0.1", 0, data_dir=root / "gateway") as server:
            issuer = server.issuer
            runtime = AUNRuntime(archive=archive, domain=issuer)
            await runtime.start()
            config = GatewayAgentConfig(
                data_dir=root / "agents", gateway_url=server.url, root_ca_path=str(server.root_ca_path),
                reconnect_max_delay=1.0,
            )
            gateway = GatewayAgent(runtime, config)
            try:
                await app(runtime)
                await gateway.start()
                await asyncio.wait_for(gateway.wait_connected(), DEMO_TIMEOUT)
                exposed = gateway.exposed()
                where = f"AUN gateway: {server.url} (issuer {server.issuer}); exposed: {', '.join(exposed)}"
                received = await _plain_client_scene(server, root / "user", runtime)
                await runtime.settle()
            finally:
                await gateway.stop()
                await runtime.stop()
    print(where)
    summary(runtime, archive)
    print(f"\nthe plain AUN client user.{issuer} received {len(received)} message(s):")
    for event in received:
        payload = event.get("payload") or {}
        text = payload.get("text") or payload.get("fallback_text") or f"<{payload.get('type')}>"
        print(f"  from {event.get('from')}: {text!r}{' (end-to-end encrypted)' if event.get('encrypted') else ''}")
    runtime.archive.close()
    return 0


async def _plain_client_scene(server: GatewayServer, home: Path, runtime: AUNRuntime) -> list[dict[str, Any]]:
    """What any AUN program does: register, connect, send, and take what comes back."""
    from aun_core import AIDStore, AUNClient
    from aun_core.keystore.local_identity_store import LocalIdentityStore
    from aun_core.logger import NullLogger

    issuer = server.issuer
    user = f"user.{issuer}"
    LocalIdentityStore(str(home), encryption_seed=_SEED, logger=NullLogger()).set_metadata_value(user, "gateway_url", server.url)
    store = AIDStore(home, _SEED, root_ca_path=str(server.root_ca_path), logger=NullLogger())
    registered = await store.register(user, type="agent")
    if not registered.ok:
        raise RuntimeError(f"the demo client could not register: {registered.error}")
    client = quiet_client(AUNClient, store.load(user).data["aid"], "error")  # type: ignore[index]
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    client.on("message.received", inbox.put_nowait)
    await client.connect({"auto_reconnect": True})
    received: list[dict[str, Any]] = []
    try:
        await client.call("message.send", {"to": f"quiet.{issuer}", "payload": {"type": "text", "text": "Anyone home?"}})
        await client.call("message.send", {"to": f"twice.{issuer}", "payload": {"type": "text", "text": "Can you hear me?"}})
        task = CodingTaskMsg(task="Print the first 10 Fibonacci numbers, space-separated.", task_id="fib")
        await client.call("message.send", {"to": f"coder.{issuer}", "payload": task.to_payload().model_dump(mode="json", by_alias=True, exclude_none=True)})
        deadline = time.monotonic() + DEMO_TIMEOUT
        # Two answers from twice and the coding result from the reviewer; quiet stays silent.
        while len(received) < 3 and time.monotonic() < deadline:
            try:
                received.append(await asyncio.wait_for(inbox.get(), deadline - time.monotonic()))
            except TimeoutError:
                break
        # Silence has no event to wait for: the archive says when quiet has its message.
        while time.monotonic() < deadline:
            if runtime.archive.count(owner=f"quiet.{issuer}", kind=RecordKind.RECEIVED):
                break
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    return received
