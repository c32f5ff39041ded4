"""One process exposes 1,000 AIDs on a local gateway (its own process) with bounded threads,
descriptors and memory, and the first, middle and last of them answer a real AUN client.

The bounds are what one exposed AID may hold: no thread of its own (the client's I/O runs on the
runtime's loop), a few descriptors (its WebSocket and its client's SQLite files, not an event loop
each) and a few hundred KB. On this 2-core machine the test takes about a minute and a half, most
of it the 1,000 registrations (a key pair, a certificate and a login each).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.network import GatewayAgent, LinkState

from .conftest import Child, Children, GatewayInfo, PlainClient, agent_config, plain_client

COUNT = 1000
#: Threads the process may gain in all, whatever the count (the archive's and the outbox's writers,
#: the loop's resolver pool...), not per AID.
MAX_THREADS = 16
#: Descriptors per exposed AID: its WebSocket and its client's one connection to ``aun.db`` with its
#: WAL and shared-memory files (4), and a little room.
MAX_FDS_PER_AID = 6
#: Memory per exposed AID: its client object with its key stores, its socket's buffers.
MAX_KB_PER_AID = 800


class Echo(AUNAgent):
    """Answers every text with the text and its own AID."""

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(f"{message.text} from {self.aid}")


def _reading() -> tuple[int, int, int]:
    with open("/proc/self/statm") as statm:
        rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return rss, threading.active_count(), len(os.listdir("/proc/self/fd"))


async def _gateway(children: Children, data: Path) -> GatewayInfo:
    # Its own process, so that what is measured here is the gateway agent's side alone; its
    # per-connection request rate lifted, as 1,000 logins at once are no abuse here.
    child = Child("gateway", [sys.executable, "-m", "aun_runtime", "gateway", "--port", "0", "--data", str(data),
                              "--json", "--rate", "100000"])
    children.started.append(child)
    line = await child.wait_for(lambda line: "gateway_url" in line)
    return GatewayInfo(line["gateway_url"], line["issuer"], line["root_ca_path"])


async def test_one_process_exposes_a_thousand_aids_with_bounded_threads_descriptors_and_memory(
    tmp_path: Path, children: Children
) -> None:
    gateway = await _gateway(children, tmp_path / "gateway")
    aids = [f"many{i:04d}.{gateway.issuer}" for i in range(COUNT)]
    runtime = AUNRuntime(archive=tmp_path / "many.sqlite", domain=gateway.issuer)
    await runtime.start()
    agent: GatewayAgent | None = None
    user: PlainClient | None = None
    try:
        for aid in aids:
            await runtime.register_agent(aid, Echo)
        rss, threads, fds = _reading()
        agent = GatewayAgent(runtime, agent_config(gateway, tmp_path / "agent"))
        await agent.start()
        await asyncio.wait_for(agent.wait_connected(), 600)
        assert set(agent.states().values()) == {LinkState.CONNECTED}
        await asyncio.sleep(1.0)  # what the clients start once connected settles
        rss_after, threads_after, fds_after = _reading()
        assert threads_after - threads <= MAX_THREADS, f"{threads_after - threads} threads for {COUNT} AIDs"
        assert (fds_after - fds) / COUNT <= MAX_FDS_PER_AID, f"{(fds_after - fds) / COUNT:.1f} descriptors per AID"
        assert (rss_after - rss) / 1024 / COUNT <= MAX_KB_PER_AID, f"{(rss_after - rss) / 1024 / COUNT:.0f} KB per AID"

        # A real AUN client, the library's defaults (end-to-end encrypted), asks three of them.
        user = await plain_client(gateway, tmp_path / "plain", "manyuser")
        asked = [aids[0], aids[COUNT // 2], aids[-1]]
        for aid in asked:
            await user.send(aid, {"type": "text", "text": "who is there?"})
        answers = await user.take(len(asked), timeout=60)
        assert sorted((a["from"], a["payload"]["text"], a["encrypted"]) for a in answers) == sorted(
            (aid, f"who is there? from {aid}", True) for aid in asked)
        assert agent.stats.received == len(asked) and agent.stats.sent == len(asked)
        assert runtime.archive.dead_letters() == []
    finally:
        if user is not None:
            await user.client.close()
        if agent is not None:
            await agent.stop()
        await runtime.close()
