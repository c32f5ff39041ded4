"""How many members a group may have and how many groups an AID may own: past either bound, -33004
naming which bound, and nothing changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aun_runtime.gateway import GatewayLimits, GatewayServer

from .conftest import RawConnection, raw_member, unique_name

LIMITS = GatewayLimits(max_group_members=3, max_groups_per_aid=2)


@pytest.fixture
async def bounded(tmp_path: Path) -> AsyncIterator[GatewayServer]:
    async with GatewayServer("127.0.0.1", port=0, data_dir=tmp_path / "gateway", limits=LIMITS) as server:
        yield server


def _limit(answer: dict[str, Any]) -> tuple[int, str, int]:
    assert "error" in answer, answer
    error = answer["error"]
    return error["code"], error["data"]["scope"], error["data"]["limit"]


async def _members(conn: RawConnection, group_id: str) -> list[str]:
    return [m["aid"] for m in (await conn.call("group.get_members", {"group_id": group_id}))["result"]["members"]]


async def test_a_full_group_takes_no_member_added_or_invited_until_one_leaves(bounded: GatewayServer) -> None:
    (alice, a), (bob, b), (carol, _), (dave, d) = [await raw_member(bounded, n) for n in ("alice", "bob", "carol", "dave")]
    group_id = (await a.call("group.create", {"group_id": unique_name("full")}))["result"]["group"]["group_id"]
    for aid in (bob, carol):
        assert "result" in await a.call("group.add_member", {"group_id": group_id, "aid": aid})
    assert _limit(await a.call("group.add_member", {"group_id": group_id, "aid": dave})) == (-33004, "members", 3)
    # An invitation may wait; accepting it into a full group is refused, and it stays to accept later.
    invite = (await a.call("group.invite_member", {"group_id": group_id, "invitee_aid": dave}))["result"]
    assert _limit(await d.call("group.accept_invite", {"invite_id": invite["invite_id"]})) == (-33004, "members", 3)
    assert await _members(a, group_id) == [alice, bob, carol]
    assert "result" in await b.call("group.leave", {"group_id": group_id})
    assert "result" in await d.call("group.accept_invite", {"invite_id": invite["invite_id"]})
    assert await _members(a, group_id) == [alice, carol, dave]


async def test_an_aid_owns_so_many_groups_and_a_dissolved_one_frees_its_place(bounded: GatewayServer) -> None:
    (alice, a), (_, b) = [await raw_member(bounded, n) for n in ("alice", "bob")]
    owned = [(await a.call("group.create", {"group_id": unique_name("own")}))["result"]["group"]["group_id"]
             for _ in range(2)]
    assert _limit(await a.call("group.create", {"group_id": unique_name("own")})) == (-33004, "groups", 2)
    # Being a member of others' groups is not owning them: bob's groups are bob's to count.
    for _ in range(2):
        theirs = (await b.call("group.create", {"group_id": unique_name("bob")}))["result"]["group"]["group_id"]
        assert "result" in await b.call("group.add_member", {"group_id": theirs, "aid": alice})
    assert _limit(await b.call("group.create", {"group_id": unique_name("bob")})) == (-33004, "groups", 2)
    assert "result" in await a.call("group.dissolve", {"group_id": owned[0]})
    assert "result" in await a.call("group.create", {"group_id": unique_name("own")})
    assert _limit(await a.call("group.create", {"group_id": unique_name("own")})) == (-33004, "groups", 2)


def test_the_bounds_must_be_positive() -> None:
    for name in ("max_group_members", "max_groups_per_aid"):
        with pytest.raises(ValueError, match=name):
            GatewayLimits(**{name: 0})
