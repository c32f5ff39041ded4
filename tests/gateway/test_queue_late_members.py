"""A queue member that joins after a sender's client learnt the AID's devices gets its share at once:
a message not wrapped for it is refused with -33050, and the AUN client fetches the devices again."""

from __future__ import annotations

import pytest
from aun_core import AUNClient

from aun_runtime.gateway import ErrorCode, GatewayServer

from .conftest import AgentFactory, Events, MemberFactory, RawConnection, raw_register, unique_name
from .test_delivery_mode import ROUND_ROBIN, owner_of, queue_connect, send, send_texts

pytestmark = pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")


async def publish_prekey(conn: RawConnection) -> None:
    answer = await conn.call("message.v2.put_peer_pk", {
        "spk_id": "spk-1", "spk_pk": "cHVibGlj", "spk_signature": "c2lnbmVk", "spk_timestamp": 1,
    })
    assert answer.get("result", {}).get("ok") is True, answer


# -- 3. a member that joins after the sender learnt the AID's devices ---------------------------


async def test_a_send_wrapped_for_too_few_members_is_refused_naming_the_missing_devices(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    sender = await alice.connect(gateway, device_id="alice-device")
    for device in ("bob-1", "bob-2"):
        await publish_prekey(await queue_connect(gateway, bob, device, ROUND_ROBIN))
    await queue_connect(gateway, bob, "bob-3", ROUND_ROBIN)  # online, but no prekey: nobody can wrap for it
    sealed = {"type": "e2ee.p2p_encrypted", "ciphertext": "...", "recipients": [[bob.aid, "bob-1", "peer"]]}
    answer = await sender.call("message.send", {"to": bob.aid, "payload": sealed})
    error = answer["error"]
    assert error["code"] == ErrorCode.E2EE_RECIPIENTS_STALE == -33050
    assert error["data"]["reason"] == "recipient_devices_changed" and error["data"]["missing_devices"] == ["bob-2"]
    assert error["data"]["field"] == "payload.recipients" and error["data"]["retryable"] is True
    assert gateway.events.find("message.stored", to=bob.aid) == []  # nothing stored, nothing assigned
    sealed["recipients"] = [[bob.aid, "bob-1", "peer"], [bob.aid, "bob-2", "peer"]]
    assert (await sender.call("message.send", {"to": bob.aid, "payload": sealed}))["result"]["status"] == "delivered"
    # A plaintext message, and a fanout receiver, are not checked: every device reads those.
    assert (await send(sender, bob.aid, "plain"))["status"] == "delivered"
    # Nor is a message for one device (the client's message.send device_id): it is wrapped for that one.
    sealed["recipients"] = [[bob.aid, "bob-1", "peer"]]
    targeted = await sender.call("message.send", {"to": bob.aid, "device_id": "bob-1", "payload": sealed})
    assert targeted["result"]["status"] == "delivered"
    assert owner_of(gateway, targeted["result"]["message_id"]) == "bob-1"


async def test_a_member_that_joins_after_the_sender_learnt_the_aids_devices_gets_its_share_at_once(
    gateway: GatewayServer, make_agent: AgentFactory, make_member: MemberFactory
) -> None:
    name = unique_name("bob")
    await make_agent(name, connect=False)
    first = await make_member(name, 1, ROUND_ROBIN)
    inboxes = Events(first, "message.received")
    alice = await make_agent(unique_name("alice"))
    await send_texts(alice, first.aid, ["hello"])  # alice's client now holds bob's devices: one
    assert [m["payload"]["text"] for m in await inboxes.take(1)] == ["hello"]
    second: AUNClient = await make_member(name, 2, ROUND_ROBIN)  # joins, publishes its prekey
    joined = Events(second, "message.received")
    texts = [f"job {i}" for i in range(4)]
    sent = await send_texts(alice, first.aid, texts)
    devices = [owner_of(gateway, s["message_id"]) for s in sent]
    assert devices.count(first.device_id) == devices.count(second.device_id) == 2  # in turn, at once
    got = {first.device_id: await inboxes.take(2), second.device_id: await joined.take(2)}
    for device, messages in got.items():
        assert [m["payload"]["text"] for m in messages] == [t for t, d in zip(texts, devices, strict=True) if d == device]
        assert all(m["encrypted"] is True for m in messages)  # the newcomer reads its share
