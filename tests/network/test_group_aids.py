"""``GatewayAgent.create_group`` makes groups the way the AUN client's own ``create_group`` does: the
group gets a certified group AID, kept in the owner's AID store, and carries encrypted messages."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aun_core import AIDStore
from aun_core.errors import AUNError
from aun_core.logger import NullLogger

from aun_runtime import Inbox, RecordKind
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgentError

from .conftest import SEED, eventually, info_of
from .test_groups import Bridged, Clients, inboxes, kinds_for

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


async def _card(gateway: GatewayServer, aid: str) -> tuple[dict[str, str], str]:
    async with aiohttp.ClientSession() as http, http.get(f"{gateway.http_url}/agent.md", headers={"Host": aid}) as got:
        assert got.status == 200, await got.text()
        return {key.lower(): value for key, value in got.headers.items()}, await got.text()


async def test_a_group_the_gateway_agent_creates_has_a_certified_aid_kept_by_its_owner(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    anna = f"anna.{info.issuer}"
    runtime, agent = await bridged(info, "first", inboxes("anna"))
    user = await plain_clients(info, "user")
    crew = await agent.create_group("crew", owner=anna, members=[user.aid])
    assert crew == f"crew.{info.issuer}"

    # A plain client resolves the group's AID and its own checks accept the certificate (the chain to
    # the trusted root, validity, the name): the one the network issued for the group.
    peer = await user.client.lookup_peer(crew)
    record = gateway.core.identities.current(crew)
    assert record is not None and peer.aid == crew and peer.cert_fingerprint == "sha256:" + record.cert_sha256
    # The group's card names its owner and verifies against the group's certificate.
    headers, card = await _card(gateway, crew)
    assert headers["x-aun-entity-owner-aid"] == anna and 'type: "group"' in card
    verified = peer.verify_agent_md(card)
    assert verified.ok and verified.data is not None and verified.data["status"] == "verified"

    # The group's key and certificate are in the owner's AID store, beside the owner's own: they
    # outlive the gateway agent, which starts again without binding the group a second time.
    await agent.stop()
    store = AIDStore(agent.config.identity_path(anna), SEED, root_ca_path=info.root_ca_path, logger=NullLogger())
    loaded = store.load(crew)
    assert loaded.ok and loaded.data is not None
    kept = loaded.data["aid"]
    assert kept.is_private_key_valid() and kept.cert_fingerprint == peer.cert_fingerprint
    store.close()
    await agent.start()
    await agent.wait_connected()
    assert gateway.events.count("group.aid.bound") == 1

    # Encrypted messages flow in it, both ways.
    await gateway.events.wait("group.state.confirmed", group_id=crew, state_version=2)
    await user.client.call("group.send", {"group_id": crew, "payload": {"type": "text", "text": "sealed hello"}})
    await eventually(lambda: kinds_for(runtime, anna, "sealed hello") == [RecordKind.RECEIVED], what="anna's copy")
    anna_inbox = await runtime.agent_instance(anna, Inbox)
    await anna_inbox.group_send(crew, "sealed answer")
    seen = await asyncio.wait_for(user.group.get(), 20)
    while seen["from"] != anna:  # its own post may come back to it first
        seen = await asyncio.wait_for(user.group.get(), 20)
    assert (seen["group_id"], seen["payload"]["text"], seen["encrypted"]) == (crew, "sealed answer", True)
    assert [e.fields["encrypted"] for e in gateway.events.find("group.message.stored", group_id=crew)] == [True, True]
    assert runtime.archive.dead_letters() == []


async def test_a_bare_group_has_no_aid_to_resolve(gateway: GatewayServer, plain_clients: Clients) -> None:
    # What create_group used to make, for contrast: a group whose id no certificate names.
    info = info_of(gateway)
    user, other = await plain_clients(info, "user"), await plain_clients(info, "other")
    bare = (await user.client.call("group.create", {"group_id": "bare"}))["group"]["group_id"]
    assert gateway.core.identities.current(bare) is None
    with pytest.raises(AUNError):
        await other.client.lookup_peer(bare)


async def test_create_group_refuses_an_owner_not_exposed_and_a_name_an_agent_holds(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    anna = f"anna.{info.issuer}"
    _, agent = await bridged(info, "first", inboxes("anna"))
    user = await plain_clients(info, "user")
    with pytest.raises(GatewayAgentError):
        await agent.create_group("crew", owner=user.aid)
    with pytest.raises(AUNError) as taken:
        await agent.create_group("user", owner=anna)  # user.<issuer> is an agent's AID
    assert taken.value.code == -32602
    assert gateway.events.count("group.aid.bound") == 0
