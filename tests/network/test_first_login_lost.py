"""An exposed AID registered on the network whose first log-in fails (the gateway is gone at that
moment) logs in again once the gateway is back, and connects.

The AUN client registers an AID without logging in; its first ``connect`` logs in. When that log-in
fails and the client goes on to back off, it holds no access token, and every later ``connect``
refuses at once ("connect requires non-empty access_token"): the link must log in again itself.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aun_core import AIDStore
from aun_core.keystore.local_identity_store import LocalIdentityStore
from aun_core.logger import NullLogger

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.network import GatewayAgent, LinkState

from .conftest import SEED, Children, agent_config, plain_client


class Echo(AUNAgent):
    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(f"echo {message.text}")


async def test_a_first_log_in_that_failed_is_made_again_once_the_gateway_is_back(
    tmp_path: Path, children: Children
) -> None:
    gateway_process, gateway, port = await children.gateway(tmp_path / "gateway")
    aid = f"lostlogin.{gateway.issuer}"
    config = agent_config(gateway, tmp_path / "agent")

    # Registered as the gateway agent registers it, and never logged in.
    home = config.identity_path(aid)
    home.mkdir(parents=True)
    LocalIdentityStore(str(home), encryption_seed=SEED, logger=NullLogger()).set_metadata_value(
        aid, "gateway_url", gateway.url)
    registered = await AIDStore(home, SEED, root_ca_path=gateway.root_ca_path, logger=NullLogger()).register(
        aid, type="agent")
    assert registered.ok, registered.error

    gateway_process.kill()  # gone when the first log-in is made
    runtime = AUNRuntime(archive=tmp_path / "runtime.sqlite", domain=gateway.issuer)
    await runtime.start()
    await runtime.register_agent(aid, Echo)
    agent = GatewayAgent(runtime, config)
    try:
        await agent.start()
        await asyncio.sleep(3)  # the first log-in fails meanwhile, and the link tries again
        assert agent.states()[aid] is LinkState.STARTING
        await children.gateway(tmp_path / "gateway", port=port)
        await asyncio.wait_for(agent.wait_connected(), 30)
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
