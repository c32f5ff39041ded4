"""Raw WebSocket frames: every error code the gateway answers with, and each is specific."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import websockets

from aun_runtime.gateway import GatewayLimits, GatewayServer

from .conftest import RawConnection, raw_register, unique_name


def error_of(answer: dict[str, object]) -> dict[str, object]:
    assert "error" in answer, answer
    error = answer["error"]
    assert isinstance(error, dict)
    return error


async def test_malformed_json_is_a_parse_error_and_the_socket_stays_open(gateway: GatewayServer) -> None:
    conn = await RawConnection.open(gateway)
    answer = await conn.send_text('{"jsonrpc": "2.0", "id": 1, "method": ')
    assert answer["id"] is None and error_of(answer)["code"] == -32700
    answer = await conn.send_text('{"jsonrpc": "2.0", "id": 2, "method": "meta.ping", "params": {"x": NaN}}')
    assert error_of(answer)["code"] == -32700  # NaN is not JSON
    assert error_of(await conn.call("meta.ping"))["code"] == -32013  # still served
    await conn.close()


@pytest.mark.parametrize(
    ("frame", "expected_id"),
    [
        ("[]", None),
        ('[{"jsonrpc": "2.0", "id": 1, "method": "meta.ping"}]', None),
        ('"just a string"', None),
        ('{"jsonrpc": "1.0", "id": 7, "method": "meta.ping"}', 7),
        ('{"id": 8, "method": "meta.ping"}', 8),
        ('{"jsonrpc": "2.0", "id": 9}', 9),
        ('{"jsonrpc": "2.0", "id": 10, "method": 42}', 10),
        ('{"jsonrpc": "2.0", "id": {"nested": 1}, "method": "meta.ping"}', None),
        ('{"jsonrpc": "2.0", "id": true, "method": "meta.ping"}', None),
    ],
)
async def test_invalid_requests(gateway: GatewayServer, frame: str, expected_id: object) -> None:
    conn = await RawConnection.open(gateway)
    answer = await conn.send_text(frame)
    assert answer["id"] == expected_id and error_of(answer)["code"] == -32600
    await conn.close()


async def test_a_lone_surrogate_escape_is_a_parse_error_and_a_pair_is_a_character(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    conn = await alice.connect(gateway)
    frame = '{"jsonrpc": "2.0", "id": 5, "method": "message.send", "params": {"to": "%s", "payload": %s}}'
    lone = frame % (bob.aid, '{"type": "text", "text": "half \\ud800 a character"}')
    error = error_of(await conn.send_text(lone))
    assert error["code"] == -32700 and "surrogate" in str(error["message"])
    assert gateway.core.inboxes.head(bob.aid) == 0  # nothing stored
    pair = frame % (bob.aid, '{"type": "text", "text": "an emoji, escaped: \\ud83d\\ude00"}')
    answer = await conn.send_text(pair)  # how an ASCII-only encoder writes it: one character
    assert answer["result"]["seq"] == 1, answer
    await conn.close()


async def test_binary_frames_are_invalid_requests(gateway: GatewayServer) -> None:
    conn = await RawConnection.open(gateway)
    await conn.ws.send(b'{"jsonrpc": "2.0", "id": 1, "method": "meta.ping"}')
    assert error_of(await conn.answer())["code"] == -32600
    await conn.close()


async def test_unknown_method(gateway: GatewayServer) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    conn = await me.connect(gateway)
    error = error_of(await conn.call("message.teleport", {"to": me.aid}))
    assert error["code"] == -32601 and "message.teleport" in str(error["message"])
    await conn.close()


async def test_methods_before_auth_connect_are_refused(gateway: GatewayServer) -> None:
    conn = await RawConnection.open(gateway)
    for method in ("message.send", "message.v2.pull", "group.send", "meta.ping"):
        assert error_of(await conn.call(method, {"to": "x.aun.localhost"}))["code"] == -32013
    await conn.close()


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("message.send", {"payload": {"type": "text", "text": "hi"}}, "to"),
        ("message.send", {"to": "not an aid", "payload": {"type": "text", "text": "hi"}}, "to"),
        ("message.send", {"to": "nobody.aun.localhost", "payload": {"type": "text", "text": "hi"}}, "to"),
        ("message.send", {"to": "SELF", "payload": "a string"}, "payload"),
        ("message.send", {"to": "SELF", "payload": {}, "need_render": "yes"}, "need_render"),
        ("message.v2.pull", {"cursor_scope": "peer", "sender_aid": "SELF", "after_seq": "zero"}, "after_seq"),
        ("message.v2.pull", {"cursor_scope": "peer", "sender_aid": "SELF", "after_seq": -1}, "after_seq"),
        ("message.v2.pull", {"cursor_scope": "peer", "sender_aid": "SELF", "limit": 10_000}, "limit"),
        ("message.v2.pull", {"cursor_scope": "global", "sender_aid": "SELF"}, "cursor_scope"),
        ("message.v2.ack", {"cursor_scope": "peer", "sender_aid": "SELF", "up_to_seq": True}, "up_to_seq"),
        ("message.peers", {"filter": "everything"}, "filter"),
        ("group.create", {"group_id": "no"}, "group_id"),
        ("group.set_settings", {"group_id": "GROUP", "settings": {"mention_mode": "sometimes"}}, "settings.mention_mode"),
        ("group.set_settings", {"group_id": "GROUP", "settings": {"color": "blue"}}, "settings.color"),
        ("group.add_member", {"group_id": "GROUP", "aid": "SELF", "role": "emperor"}, "role"),
        ("group.send", {"group_id": "GROUP"}, "payload"),
    ],
)
async def test_bad_params_name_the_field(
    gateway: GatewayServer, method: str, params: dict[str, object], field: str
) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    other = await raw_register(gateway, unique_name("bob"))
    conn = await me.connect(gateway)
    group = (await conn.call("group.create", {"group_id": unique_name("room")}))["result"]["group"]["group_id"]
    text = json.dumps(params).replace('"SELF"', json.dumps(me.aid)).replace('"GROUP"', json.dumps(group))
    filled = json.loads(text)
    if method == "group.add_member" and filled.get("aid") == me.aid:
        filled["aid"] = other.aid
    error = error_of(await conn.call(method, filled))
    assert error["code"] == -32602, error
    assert error["data"]["field"] == field  # type: ignore[index]
    await conn.close()


async def test_positional_params_are_refused(gateway: GatewayServer) -> None:
    conn = await RawConnection.open(gateway)
    answer = await conn.send_text('{"jsonrpc": "2.0", "id": 3, "method": "auth.connect", "params": [1, 2]}')
    assert error_of(answer)["code"] == -32602 and error_of(answer)["data"] == {"field": "params"}
    await conn.close()


async def test_bad_client_signatures_are_refused(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    conn = await alice.connect(gateway)
    params = {"to": bob.aid, "payload": {"type": "text", "text": "hi"}, "message_id": "m-1"}
    good = alice.sign("message.send", params)
    tampered = {**good, "payload": {"type": "text", "text": "changed after signing"}}
    as_bob = alice.sign("message.send", params, as_aid=bob.aid)
    stale = alice.sign("message.send", params, timestamp=1_000_000_000)
    forged = {**good, "client_signature": {**good["client_signature"], "signature": bob.sign("message.send", params)[
        "client_signature"]["signature"]}}
    broken = {**params, "client_signature": {"aid": alice.aid}}
    for frame in (tampered, as_bob, stale, forged, broken):
        error = error_of(await conn.call("message.send", frame))
        assert error["code"] == -32003, error
    assert gateway.core.inboxes.head(bob.aid) == 0  # none of them was stored
    assert (await conn.call("message.send", good))["result"]["seq"] == 1
    await conn.close()


async def test_permission_denied_for_another_devices_cursor(gateway: GatewayServer) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    conn = await bob.connect(gateway, device_id="bobs-phone")
    for params in (
        {"cursor_scope": "peer", "sender_aid": alice.aid, "device_id": "bobs-laptop"},
        {"cursor_scope": "peer", "sender_aid": alice.aid, "slot_id": "other-slot"},
        {"cursor_scope": "peer", "sender_aid": alice.aid, "aid": alice.aid},
    ):
        error = error_of(await conn.call("message.v2.pull", params))
        assert error["code"] == -32004, error
    await conn.close()


async def test_oversized_frames(tmp_path: Path) -> None:
    limits = GatewayLimits(max_frame_bytes=10_000, hard_frame_bytes=20_000)
    async with GatewayServer(port=0, data_dir=tmp_path / "gw", limits=limits) as server:
        conn = await RawConnection.open(server)
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "meta.ping", "params": {"pad": "x" * 15_000}})
        error = error_of(await conn.send_text(big))
        assert error["code"] == -32600 and error["data"] == {"limit": 10_000}
        assert error_of(await conn.call("meta.ping"))["code"] == -32013  # the socket is still served
        await conn.ws.send("y" * 30_000)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await conn.answer()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_the_default_frame_bound_is_the_clients(gateway: GatewayServer) -> None:
    conn = await RawConnection.open(gateway)
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "meta.ping", "params": {"pad": "x" * 1_000_001}})
    assert error_of(await conn.send_text(big))["data"] == {"limit": 1_000_000}
    await conn.close()


async def test_rate_limit_per_connection(tmp_path: Path) -> None:
    limits = GatewayLimits(rate_per_second=0.5, rate_burst=3)
    async with GatewayServer(port=0, data_dir=tmp_path / "gw", limits=limits) as server:
        conn = await RawConnection.open(server)
        codes = [error_of(await conn.call("meta.ping"))["code"] for _ in range(5)]
        assert codes == [-32013, -32013, -32013, -32429, -32429]
        error = error_of(await conn.call("meta.ping"))
        assert error["data"]["retryable"] is True and error["data"]["retry_after_ms"] > 0  # type: ignore[index]
        other = await RawConnection.open(server)  # the budget is per connection
        assert error_of(await other.call("meta.ping"))["code"] == -32013
        await conn.close()
        await other.close()
