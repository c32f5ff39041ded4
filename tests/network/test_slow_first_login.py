"""An exposed AID's first connection that fails: the link tries again until the AID connects.

* A gateway too slow to answer: the gateway process is frozen (SIGSTOP) past the client's WebSocket
  connect timeout while an already registered AID makes its first connection, then thawed.
* A first log-in that failed: the AUN client registers an AID without logging in, and its first
  ``connect`` logs in. When that log-in fails (the gateway is gone) and the client goes on to back
  off, it holds no access token, and every later ``connect`` refuses at once ("connect requires
  non-empty access_token"), and so does ``authenticate`` outside standby: the link must put the
  client back in standby itself.

Either way the AID must come onto the network and answer a real client.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from aun_core import AIDStore
from aun_core.keystore.local_identity_store import LocalIdentityStore
from aun_core.logger import NullLogger

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.network import GatewayAgent, GatewayAgentConfig, LinkState

from .conftest import SEED, Children, GatewayInfo, agent_config, plain_client

#: The AUN client's WebSocket connect timeout, which a first connection waits out against a frozen gateway.
CONNECT_TIMEOUT = 10.0


class Echo(AUNAgent):
    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.reply(f"echo {message.text}")


async def echo_runtime(tmp_path: Path, name: str, gateway: GatewayInfo, aid: str,
                       config: GatewayAgentConfig) -> tuple[AUNRuntime, GatewayAgent]:
    """A started runtime holding ``aid`` (an :class:`Echo`) and its gateway agent, not yet started."""
    runtime = AUNRuntime(archive=tmp_path / f"{name}.sqlite", domain=gateway.issuer)
    await runtime.start()
    await runtime.register_agent(aid, Echo)
    return runtime, GatewayAgent(runtime, config)


async def answers(gateway: GatewayInfo, tmp_path: Path, aid: str) -> None:
    """``aid`` answers a plain AUN client through the network."""
    user = await plain_client(gateway, tmp_path / "users", "user")
    try:
        await user.send(aid, {"type": "text", "text": "hi"})
        reply = await user.next(timeout=30)
        assert (reply["from"], reply["payload"]["text"]) == (aid, "echo hi")
    finally:
        await user.client.close()


async def test_a_first_connection_that_timed_out_is_tried_again_and_the_aid_connects(
    tmp_path: Path, children: Children
) -> None:
    gateway_process, gateway, _ = await children.gateway(tmp_path / "gateway")
    aid = f"slow.{gateway.issuer}"
    config = agent_config(gateway, tmp_path / "agent")

    # Registered once, so the second start needs the gateway only to log in and connect.
    runtime, agent = await echo_runtime(tmp_path, "first", gateway, aid, config)
    await agent.start()
    await asyncio.wait_for(agent.wait_connected(), 60)
    await agent.stop()
    await runtime.stop()

    runtime, agent = await echo_runtime(tmp_path, "second", gateway, aid, config)
    gateway_process.process.send_signal(signal.SIGSTOP)
    try:
        await agent.start()
        await asyncio.sleep(CONNECT_TIMEOUT + 2)  # the first attempt times out meanwhile
        assert agent.states()[aid] is LinkState.STARTING
    finally:
        gateway_process.process.send_signal(signal.SIGCONT)
    try:
        await asyncio.wait_for(agent.wait_connected(), 60)
        await answers(gateway, tmp_path, aid)
    finally:
        await agent.stop()
        await runtime.stop()


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
    runtime, agent = await echo_runtime(tmp_path, "runtime", gateway, aid, config)
    try:
        await agent.start()
        await asyncio.sleep(3)  # the first log-in fails meanwhile, and the link tries again
        assert agent.states()[aid] is LinkState.STARTING
        await children.gateway(tmp_path / "gateway", port=port)
        await asyncio.wait_for(agent.wait_connected(), 30)
        await answers(gateway, tmp_path, aid)
    finally:
        await agent.stop()
        await runtime.stop()
