"""What an exposed agent declares on the network: its agent.md card, published by the gateway agent
with ``behavior_mode: autonomous``, and the same mode in ``meta.status``; read by a plain AUN client
the way the client library reads cards (``/agent.md`` with ``Host: <aid>``) and checked with the
client's own signature verification."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from aun_core.agent_md import AgentMdManager
from aun_core.agent_md_schema import validate_agent_md_document

from aun_runtime import AUNRuntime
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent

from .apps import Relay
from .conftest import PlainClient, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]

REVIEWER_MD = """---
aid: "reviewer.aun.localhost"
name: "Code Reviewer"
type: "assistant"
version: "1.2.0"
description: "Reads code and says what is wrong with it"
tags: [review, python]
---
# Code Reviewer
Send it a diff; it may answer, or not.
"""


async def register_two(runtime: AUNRuntime) -> None:
    await runtime.register_agent(f"reviewer.{runtime.domain}", Relay, card=REVIEWER_MD)
    await runtime.register_agent(f"plainer.{runtime.domain}", Relay, description="Relays what it is told")


async def served(gateway: GatewayServer, aid: str) -> tuple[int, str, Mapping[str, str]]:
    """``GET /agent.md`` with ``Host: <aid>``: the request the AUN client's card manager makes."""
    async with aiohttp.ClientSession() as session, session.get(
        f"{gateway.http_url}/agent.md", headers={"Host": aid, "Accept": "text/markdown"}
    ) as answer:
        return answer.status, await answer.text(), answer.headers.copy()  # names in any case


async def test_an_exposed_agent_publishes_its_own_card_declaring_autonomous(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    runtime, agent = await bridged(info_of(gateway), "r1", register_two)
    reviewer = f"reviewer.{runtime.domain}"
    user = await plain_clients(info_of(gateway), "reader")

    status, text, headers = await served(gateway, reviewer)
    assert status == 200 and headers["Content-Type"].startswith("text/markdown")
    card = validate_agent_md_document(text, expected_aid=reviewer, require_signature=True)
    front: dict[str, Any] = card["frontmatter"]
    # The agent's own card, field for field and body, with its behaviour mode added.
    assert (front["name"], front["version"], front["tags"]) == ("Code Reviewer", "1.2.0", ["review", "python"])
    assert front["behavior_mode"] == "autonomous"
    assert card["payload"].endswith("# Code Reviewer\nSend it a diff; it may answer, or not.\n")
    # Signed with the AID's own key: the client's verification, against the certificate it looks up.
    peer = await user.client.lookup_peer(reviewer)
    verified = peer.verify_agent_md(text)
    assert verified.ok and verified.data is not None and verified.data["status"] == "verified", verified.error

    # The agent's own session reports the same declaration (meta.status extension fields).
    answer = await agent.call(reviewer, "meta.status")
    assert answer["mode"] == "gateway" and answer["behavior_mode"] == "autonomous"
    assert answer["agent_md_etag"] == headers["ETag"]


async def test_an_agent_without_a_card_gets_a_minimal_one_the_client_finds(
    gateway: GatewayServer, bridged: Bridged, tmp_path: Path
) -> None:
    runtime, _ = await bridged(info_of(gateway), "r2", register_two)
    plainer = f"plainer.{runtime.domain}"

    status, text, headers = await served(gateway, plainer)
    assert status == 200
    front = validate_agent_md_document(text, expected_aid=plainer, require_signature=True)["frontmatter"]
    assert (front["name"], front["description"], front["behavior_mode"]) == ("plainer", "Relays what it is told", "autonomous")
    # The client's card manager, set up as the client sets up its own (cards through the gateway's
    # host, addressed by Host), finds it and its version.
    manager = AgentMdManager(tmp_path / "manager", verify_ssl=False, owner_aid_getter=lambda: "",
                             gateway_resolver=lambda aid: gateway.url, upload_via_gateway_host=True)
    checked = await manager.check(plainer, 0)
    assert checked["remote_found"] is True and checked["remote_etag"] == headers["ETag"]


async def test_a_restarted_gateway_agent_leaves_an_unchanged_card_as_it_is(
    gateway: GatewayServer, bridged: Bridged
) -> None:
    runtime, agent = await bridged(info_of(gateway), "r3", register_two)
    reviewer = f"reviewer.{runtime.domain}"
    _, first, headers = await served(gateway, reviewer)
    await agent.stop()
    await agent.start()
    await agent.wait_connected()
    _, again, headers_again = await served(gateway, reviewer)
    assert again == first and headers_again["ETag"] == headers["ETag"]  # not re-signed, not replaced
