"""Invitations on the wire: each refusal's own code, the pushes to the invitee, and the bounds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._group_invite_store import (
    MAX_PENDING_INVITES_PER_AID,
    MAX_PENDING_INVITES_PER_GROUP,
    GroupInviteStore,
    Invite,
)

from .conftest import RawConnection, error_of, raw_member, raw_register, unique_name


async def _new_group(conn: RawConnection, **params: Any) -> str:
    answer = await conn.call("group.create", {"group_id": unique_name("inv"), **params})
    return str(answer["result"]["group"]["group_id"])


def _pushed(conn: RawConnection, event: str) -> list[dict[str, Any]]:
    return [p["params"] for p in conn.pushes if p["method"] == f"event/{event}"]


async def test_bad_invitations_and_answers_get_their_own_errors(gateway: GatewayServer) -> None:
    (alice, a), (bob, b), (_, c) = [await raw_member(gateway, n) for n in ("alice", "bob", "carol")]
    group_id = await _new_group(a)
    nobody = f"nobody.{gateway.issuer}"
    assert error_of(await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": nobody})) == (
        -32602, "invitee_aid")
    assert error_of(await a.call("group.invite_member", {"group_id": group_id, "aid": "Not An AID"})) == (-32602, "aid")
    assert error_of(await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": bob,
                                                       "member_type": "robot"})) == (-32602, "member_type")
    assert error_of(await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": alice}))[0] == -33005
    assert error_of(await c.call("group.invite_member", {"group_id": group_id, "invitee_aid": bob}))[0] == -33006
    invite = (await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": bob}))["result"]
    assert error_of(await c.call("group.accept_invite", {"invite_id": invite["invite_id"]})) == (-33008, "invite_id")
    assert error_of(await c.call("group.reject_invite", {"invite_id": invite["invite_id"]})) == (-33008, "invite_id")
    assert error_of(await b.call("group.accept_invite", {})) == (-32602, "invite_id")
    assert error_of(await a.call("group.revoke_invite", {"invite_id": "gi-none"})) == (-33008, "invite_id")
    assert error_of(await b.call("group.revoke_invite", {"invite_id": invite["invite_id"]})) == (-32004, "invite_id")
    # What bob's connection was told: one pending aggregate, not yet finalized.
    await b.call("meta.ping", {})
    created = _pushed(b, "group.invite_created")
    assert [(p["invite_ids"], p["inviter_aids"], p["status"]) for p in created] == [
        ([invite["invite_id"]], [alice], "pending")]
    assert _pushed(b, "group.invite_finalized") == []
    assert _pushed(c, "group.invite_created") == []


async def test_several_inviters_make_one_aggregate_that_accepting_ends_as_a_whole(gateway: GatewayServer) -> None:
    (_, a), (bob, b), (carol, c) = [await raw_member(gateway, n) for n in ("alice", "bob", "carol")]
    group_id = await _new_group(a, visibility="public")
    assert "result" in await a.call("group.add_member", {"group_id": group_id, "aid": bob})
    # A public group: any member invites.
    first = (await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": carol}))["result"]
    second = (await b.call("group.invite_member", {"group_id": group_id, "invitee_aid": carol}))["result"]
    items = (await c.call("group.list_my_invites", {}))["result"]["items"]
    assert [(i["invite_ids"], len(i["inviter_aids"])) for i in items] == [([first["invite_id"], second["invite_id"]], 2)]
    # Revoking one leaves the other pending; accepting the other ends both.
    assert "result" in await b.call("group.revoke_invite", {"invite_id": second["invite_id"]})
    accepted = (await c.call("group.accept_invite", {"invite_id": first["invite_id"]}))["result"]
    assert (accepted["status"], accepted["invite_ids"]) == ("accepted", [first["invite_id"]])
    assert (await c.call("group.list_my_invites", {}))["result"]["items"] == []
    events = (await a.call("group.pull_events", {"group_id": group_id}))["result"]["events"]
    assert (events[-1]["action"], events[-1]["member_aid"], events[-1]["via"]) == ("member_added", carol, "invite")
    await c.call("meta.ping", {})
    assert [(p["status"], p["pending_invite_ids"]) for p in _pushed(c, "group.invite_finalized")] == [
        ("pending", [first["invite_id"]]), ("accepted", [])]


async def test_a_dissolved_group_ends_its_invitations(gateway: GatewayServer) -> None:
    (_, a), (bob, b) = [await raw_member(gateway, n) for n in ("alice", "bob")]
    group_id = await _new_group(a)
    invite = (await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": bob}))["result"]
    assert "result" in await a.call("group.dissolve", {"group_id": group_id})
    assert error_of(await b.call("group.accept_invite", {"invite_id": invite["invite_id"]}))[0] == -33008
    await b.call("meta.ping", {})
    assert [p["status"] for p in _pushed(b, "group.invite_finalized")] == ["ended"]


async def test_pending_invitations_are_bounded_per_group_and_per_invitee(gateway: GatewayServer) -> None:
    (alice, a), (bob, _), (carol, _) = [await raw_member(gateway, n) for n in ("alice", "bob", "carol")]
    store, now = GroupInviteStore(gateway.core.db), time.time()
    full = await _new_group(a)
    for n in range(MAX_PENDING_INVITES_PER_GROUP):
        store.add(Invite(f"gi-g{n}", full, f"x{n}.{gateway.issuer}", alice, "human", now, now + 60))
    refused = await a.call("group.invite_member", {"group_id": full, "invitee_aid": bob})
    assert error_of(refused)[0] == -33004 and refused["error"]["data"]["scope"] == "group"

    for n in range(MAX_PENDING_INVITES_PER_AID):
        store.add(Invite(f"gi-a{n}", f"other{n}.{gateway.issuer}", carol, alice, "human", now, now + 60))
    refused = await a.call("group.invite_member", {"group_id": await _new_group(a), "invitee_aid": carol})
    assert error_of(refused) == (-33004, "invitee_aid") and refused["error"]["data"]["scope"] == "invitee"

    # Expired invitations count for nothing and are read as gone.
    for n in range(MAX_PENDING_INVITES_PER_AID):
        store.add(Invite(f"gi-old{n}", f"old{n}.{gateway.issuer}", bob, alice, "human", now - 120, now - 60))
    assert store.of_invitee(bob) == [] and store.get("gi-old0") is None
    assert "result" in await a.call("group.invite_member", {"group_id": await _new_group(a), "invitee_aid": bob})
    rows = gateway.core.db.row("SELECT COUNT(*) FROM group_invites WHERE invitee_aid = ?", (bob,))
    assert rows[0] == 1  # the expired ones were deleted on the way


async def test_pending_invitations_and_departures_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "gateway"
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as first:
        port = first.port
        alice, bob, carol = [await raw_register(first, unique_name(n)) for n in ("alice", "bob", "carol")]
        a, c = await alice.connect(first), await carol.connect(first)
        group_id = await _new_group(a)
        invite = (await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": bob.aid}))["result"]
        assert "result" in await a.call("group.add_member", {"group_id": group_id, "aid": carol.aid})
        assert "result" in await c.call("group.leave", {"group_id": group_id})
        await a.close()
        await c.close()

    async with GatewayServer("127.0.0.1", port=port, data_dir=data) as second:
        b, c = await bob.connect(second), await carol.connect(second)
        items = (await b.call("group.list_my_invites", {}))["result"]["items"]
        assert [i["invite_ids"] for i in items] == [[invite["invite_id"]]]
        assert (await b.call("group.accept_invite", {"invite_id": invite["invite_id"]}))["result"]["status"] == "accepted"
        events = (await c.call("group.pull_events", {"group_id": group_id}))["result"]["events"]
        assert events[-1]["action"] == "member_left"  # carol reads up to her departure, and no further
        assert error_of(await c.call("group.send", {"group_id": group_id, "payload": {"text": "x"}}))[0] == -33006
        await b.close()
        await c.close()
