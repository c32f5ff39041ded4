"""Leaving, removing, roles and dissolving on the wire: every refusal has its own error code."""

from __future__ import annotations

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._group_store import MAX_DEPARTURES

from .conftest import RawConnection, error_of, raw_member, unique_name


async def _group(gateway: GatewayServer, *names: str) -> tuple[str, list[tuple[str, RawConnection]]]:
    members = [await raw_member(gateway, name) for name in names]
    owner = members[0][1]
    group_id = (await owner.call("group.create", {"group_id": unique_name("wire")}))["result"]["group"]["group_id"]
    for aid, _ in members[1:]:
        assert "result" in await owner.call("group.add_member", {"group_id": group_id, "aid": aid})
    return group_id, members


async def test_leaving_is_for_members_other_than_the_owner(gateway: GatewayServer) -> None:
    group_id, [(alice, a), (bob, b)] = await _group(gateway, "alice", "bob")
    _, outsider = await raw_member(gateway, "mallory")
    assert error_of(await outsider.call("group.leave", {"group_id": group_id}))[0] == -33006
    owner_leaves = await a.call("group.leave", {"group_id": group_id})
    assert error_of(owner_leaves)[0] == -33002 and owner_leaves["error"]["data"]["reason"] == "owner_cannot_leave"
    assert error_of(await b.call("group.leave", {})) == (-32602, "group_id")
    assert error_of(await b.call("group.leave", {"group_id": "nosuchgroup"}))[0] == -33001
    left = (await b.call("group.leave", {"group_id": group_id}))["result"]
    assert (left["left_aid"], left["group"]["member_count"]) == (bob, 1)
    assert error_of(await b.call("group.leave", {"group_id": group_id}))[0] == -33006
    assert error_of(await b.call("group.send", {"group_id": group_id, "payload": {"text": "hi"}}))[0] == -33006
    assert error_of(await b.call("group.v2.pull", {"group_id": group_id}))[0] == -33006
    assert [m["aid"] for m in (await a.call("group.get_members", {"group_id": group_id}))["result"]["members"]] == [alice]


async def test_removing_members_needs_the_right_role_and_never_touches_the_owner(gateway: GatewayServer) -> None:
    group_id, [(alice, a), (bob, b), (carol, c), (dave, _)] = await _group(gateway, "alice", "bob", "carol", "dave")
    assert "result" in await a.call("group.set_role", {"group_id": group_id, "aid": bob, "role": "admin"})
    _, outsider = await raw_member(gateway, "mallory")
    assert error_of(await outsider.call("group.kick", {"group_id": group_id, "aid": dave}))[0] == -33006
    assert error_of(await c.call("group.kick", {"group_id": group_id, "aid": dave}))[0] == -33007
    assert error_of(await b.call("group.kick", {"group_id": group_id, "aid": alice})) == (-32004, "aid")
    assert error_of(await b.call("group.kick", {"group_id": group_id, "aid": bob})) == (-32602, "aid")
    assert error_of(await b.call("group.kick", {"group_id": group_id, "aid": "Not An AID"})) == (-32602, "aid")
    assert error_of(await b.call("group.kick", {"group_id": group_id, "aid": f"nobody.{gateway.issuer}"})) == (
        -33006, "aid")
    assert "result" in await a.call("group.set_role", {"group_id": group_id, "aid": carol, "role": "admin"})
    assert error_of(await b.call("group.remove_member", {"group_id": group_id, "aid": carol}))[0] == -33007
    removed = (await a.call("group.remove_member", {"group_id": group_id, "aid": carol}))["result"]
    assert removed["removed_aid"] == carol
    assert (await b.call("group.kick", {"group_id": group_id, "aid": dave}))["result"]["removed_aid"] == dave
    members = (await a.call("group.get_members", {"group_id": group_id}))["result"]["members"]
    assert [(m["aid"], m["role"]) for m in members] == [(alice, "owner"), (bob, "admin")]
    await c.call("meta.ping", {})
    changes = [p["params"] for p in c.pushes if p["method"] == "event/group.changed"]
    assert changes[-1]["action"] == "member_removed" and changes[-1]["member_aid"] == carol


async def test_roles_are_set_by_the_owner_and_an_admin_may_only_step_down(gateway: GatewayServer) -> None:
    group_id, [(alice, a), (bob, b), (carol, c)] = await _group(gateway, "alice", "bob", "carol")
    assert error_of(await a.call("group.set_role", {"group_id": group_id, "aid": bob, "role": "owner"})) == (
        -32602, "role")
    assert error_of(await c.call("group.set_role", {"group_id": group_id, "aid": carol, "role": "admin"}))[0] == -33007
    assert (await a.call("group.set_role", {"group_id": group_id, "aid": bob, "role": "admin"}))["result"][
        "new_role"] == "admin"
    assert error_of(await b.call("group.set_role", {"group_id": group_id, "aid": carol, "role": "admin"}))[0] == -33007
    assert error_of(await b.call("group.set_role", {"group_id": group_id, "aid": alice, "role": "member"})) == (
        -32004, "aid")
    assert error_of(await a.call("group.set_role", {"group_id": group_id, "aid": f"nobody.{gateway.issuer}",
                                                  "role": "admin"})) == (-33006, "aid")
    stepped = (await b.call("group.set_role", {"group_id": group_id, "aid": bob, "role": "member"}))["result"]
    assert (stepped["old_role"], stepped["member"]["role"]) == ("admin", "member")


async def test_one_who_left_reads_the_events_up_to_its_departure_and_no_further(gateway: GatewayServer) -> None:
    group_id, [(_, a), (bob, b)] = await _group(gateway, "alice", "bob")
    assert "result" in await b.call("group.leave", {"group_id": group_id})
    assert "result" in await a.call("group.set_settings", {"group_id": group_id,
                                                           "settings": {"mention_mode": "mention-only"}})
    events = (await b.call("group.pull_events", {"group_id": group_id, "after_event_seq": 0}))["result"]
    assert [e["action"] for e in events["events"]] == ["group_created", "member_added", "member_left"]
    assert events["cursor"]["latest_seq"] == 3 and events["has_more"] is False
    assert (await b.call("group.ack_events", {"group_id": group_id, "event_seq": 9}))["result"]["ack_seq"] == 3
    _, outsider = await raw_member(gateway, "mallory")
    assert error_of(await outsider.call("group.pull_events", {"group_id": group_id}))[0] == -33006
    # Coming back is joining anew: the whole log again, as for any member.
    assert "result" in await a.call("group.add_member", {"group_id": group_id, "aid": bob})
    assert gateway.core.groups.departure(group_id, bob) is None
    events = (await b.call("group.pull_events", {"group_id": group_id, "after_event_seq": 3}))["result"]
    assert [e["action"] for e in events["events"]] == ["settings_updated", "member_added"]


async def test_only_the_owner_dissolves_and_a_dissolved_group_refuses_the_rest(gateway: GatewayServer) -> None:
    group_id, [(_, a), (bob, b)] = await _group(gateway, "alice", "bob")
    assert "result" in await a.call("group.set_role", {"group_id": group_id, "aid": bob, "role": "admin"})
    assert error_of(await b.call("group.dissolve", {"group_id": group_id}))[0] == -33007
    assert (await a.call("group.dissolve", {"group_id": group_id}))["result"]["status"] == "dissolved"
    for conn, method in ((a, "group.get_info"), (b, "group.send"), (a, "group.dissolve"), (b, "group.leave")):
        answer = await conn.call(method, {"group_id": group_id, "payload": {"text": "x"}})
        assert error_of(answer) == (-33002, "group_id") and answer["error"]["data"]["reason"] == "dissolved"
    # Both may still read the events up to the dissolution, so their clients learn of it.
    events = (await b.call("group.pull_events", {"group_id": group_id}))["result"]["events"]
    assert events[-1]["action"] == "dissolved"
    assert (await a.call("group.list_my", {}))["result"]["groups"] == []


def test_departures_remembered_per_group_are_bounded(gateway: GatewayServer) -> None:
    groups = gateway.core.groups
    group = groups.create(f"bounded.{gateway.issuer}", "bounded", f"owner.{gateway.issuer}", "", "private")
    for n in range(MAX_DEPARTURES + 5):
        aid = f"m{n:05d}.{gateway.issuer}"
        groups.add_member(group, aid, "member")
        groups.remove_member(group, aid)
    count = gateway.core.db.row("SELECT COUNT(*) FROM group_departures WHERE group_id = ?",
                                (group.group_id,))[0]
    assert count == MAX_DEPARTURES
    assert groups.departure(group.group_id, f"m{MAX_DEPARTURES + 4:05d}.{gateway.issuer}") is not None
    assert groups.departure(group.group_id, f"m{0:05d}.{gateway.issuer}") is None
