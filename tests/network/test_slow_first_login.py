"""A gateway too slow to answer an exposed AID's first connection: the link tries again and connects.

The gateway process is frozen (SIGSTOP) past the client's WebSocket connect timeout while an already
registered AID makes its first connection, then thawed: the AID must come onto the network and
answer a real client.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.network import GatewayAgent, LinkState

from .conftest import Children, agent_config, plain_client

#: The AUN client's WebSocket connect timeout, which a first connection waits out against a frozen gateway.
CONNECT_TIMEOUT = 10.0


class Echo(AUNAgent):
    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(f"echo {message.text}")


async def test_a_first_connection_that_timed_out_is_tried_again_and_the_aid_connects(
    tmp_path: Path, children: Children
) -> None:
    gateway_process, gateway, _ = await children.gateway(tmp_path / "gateway")
    aid = f"slow.{gateway.issuer}"
    config = agent_config(gateway, tmp_path / "agent")

    # Registered once, so the second start needs the gateway only to log in and connect.
    runtime = AUNRuntime(archive=tmp_path / "first.sqlite", domain=gateway.issuer)
    await runtime.start()
    await runtime.register_agent(aid, Echo)
    agent = GatewayAgent(runtime, config)
    await agent.start()
    await asyncio.wait_for(agent.wait_connected(), 60)
    await agent.stop()
    await runtime.stop()

    runtime = AUNRuntime(archive=tmp_path / "second.sqlite", domain=gateway.issuer)
    await runtime.start()
    await runtime.register_agent(aid, Echo)
    agent = GatewayAgent(runtime, config)
    gateway_process.process.send_signal(signal.SIGSTOP)
    try:
        await agent.start()
        await asyncio.sleep(CONNECT_TIMEOUT + 2)  # the first attempt times out meanwhile
        assert agent.states()[aid] is LinkState.STARTING
    finally:
        gateway_process.process.send_signal(signal.SIGCONT)
    try:
        await asyncio.wait_for(agent.wait_connected(), 60)
        user = await plain_client(gateway, tmp_path / "users", "user")
        try:
            await user.send(aid, {"type": "text", "text": "hi"})
            reply = await user.next(timeout=30)
            assert (reply["from"], reply["payload"]["text"]) == (aid, "echo hi")
        finally:
            await user.client.close()
    finally:
        await agent.stop()
        await runtime.stop()
