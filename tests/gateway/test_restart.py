"""A gateway restarted between send and pull loses nothing it acknowledged; tokens and groups survive."""

from __future__ import annotations

from pathlib import Path

from aun_runtime.gateway import GatewayServer

from .conftest import Events, register_client, unique_name


async def test_restart_between_send_and_pull_loses_nothing(tmp_path: Path) -> None:
    data, home = tmp_path / "gateway", tmp_path / "agents"
    alice_name, bob_name, crew = unique_name("alice"), unique_name("bob"), unique_name("crew")
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as first:
        port = first.port
        alice, bob = await register_client(first, home, alice_name), await register_client(first, home, bob_name)
        await alice.connect({"auto_reconnect": False})
        await bob.connect({"auto_reconnect": False})
        group_id = (await alice.call("group.create", {"group_id": crew}))["group"]["group_id"]
        await alice.call("group.add_member", {"group_id": group_id, "aid": bob.aid})
        bob_aid = bob.aid
        early_inbox = Events(bob, "message.received")
        early = await alice.call("message.send", {"to": bob_aid, "payload": {"type": "text", "text": "early"},
                                                  "encrypt": False})
        assert (await early_inbox.next())["payload"]["text"] == "early"
        acked = await first.events.wait("message.acked", receiver=bob_aid, ack_seq=early["seq"])
        bob_device = acked.fields["device_id"]
        await bob.close()
        await first.events.wait("disconnected", aid=bob_aid)
        sent = [
            await alice.call("message.send", {"to": bob_aid, "payload": {"type": "text", "text": "plain"}, "encrypt": False}),
            await alice.call("message.send", {"to": bob_aid, "payload": {"type": "text", "text": "secret"}}),
        ]
        assert [s["status"] for s in sent] == ["stored", "stored"]
        await alice.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": "to the crew"},
                                        "encrypt": False})
        await alice.close()

    async with GatewayServer("127.0.0.1", port=port, data_dir=data) as second:
        assert second.url == first.url
        # Cursors survived: bob's device had acknowledged "early", and the server still knows it.
        assert second.core.inboxes.ack_seq(bob_aid, bob_device, "default", f"{alice_name}.{second.issuer}") == early["seq"]
        bob = await register_client(second, home, bob_name)
        direct, group = Events(bob, "message.received"), Events(bob, "group.message_created")
        await bob.connect({"auto_reconnect": False})
        try:
            received = await direct.take(2)
            assert [(m["payload"]["text"], m["seq"]) for m in received] == [("plain", sent[0]["seq"]),
                                                                               ("secret", sent[1]["seq"])]
            assert received[1]["encrypted"] is True
            assert (await group.next())["payload"]["text"] == "to the crew"
            # The token issued before the restart was still good: no new login was needed.
            assert second.events.find("auth.login", aid=bob_aid) == []
            assert second.events.find("connected", aid=bob_aid)
            await second.events.wait("message.acked", receiver=bob_aid, ack_seq=sent[1]["seq"])
            assert direct.drain() == []
        finally:
            await bob.close()
