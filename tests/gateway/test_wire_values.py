"""Values a client cannot read are refused on the way in, so none is ever relayed; numeric params
are bounded before they reach SQLite; a login clock that is no number is a bad clock."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._frames import dumps

from .conftest import AgentFactory, Events, RawConnection, raw_register, start_login, unique_name

SAFE = 2**53 - 1


def error_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert "error" in answer, answer
    error = answer["error"]
    assert isinstance(error, dict)
    return error


def refused_field(answer: dict[str, Any]) -> str:
    error = error_of(answer)
    assert error["code"] == -32602, error
    return str(error["data"]["field"])


def frame(method: str, params_json: str, request_id: int = 1) -> str:
    """A request written by hand, so a number can be spelled as no encoder would."""
    return f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "{method}", "params": {params_json}}}'


POISON = [  # (JSON text of a value, why a client refuses it)
    (str(SAFE + 1), "integer"),
    (str(-(SAFE + 1)), "integer"),
    ("18446744073709551616", "integer"),
    ("1e400", "finite"),
    ("-1e400", "finite"),
    ("1e300", "number"),
]


@pytest.mark.parametrize(("value", "word"), POISON)
async def test_a_value_no_client_can_read_is_refused_naming_its_path(
    gateway: GatewayServer, value: str, word: str, caplog: pytest.LogCaptureFixture
) -> None:
    alice, bob = await raw_register(gateway, unique_name("alice")), await raw_register(gateway, unique_name("bob"))
    conn = await alice.connect(gateway)
    caplog.set_level(logging.INFO, "aun_runtime.gateway")
    payload = '{"type": "json", "kind": "k", "data": {"items": [1, {"n": VALUE}]}}'.replace("VALUE", value)
    answer = await conn.send_text(frame("message.send", f'{{"to": "{bob.aid}", "payload": {payload}}}'))
    assert refused_field(answer) == "payload.data.items[1].n"
    assert word in error_of(answer)["message"]
    assert gateway.core.inboxes.head(bob.aid) == 0  # nothing stored, nothing relayed
    [line] = [r for r in caplog.records if "refused" in r.getMessage() and "payload.data.items[1].n" in r.getMessage()]
    assert line.exc_info is None  # one line, no traceback
    # The edge itself is fine, and the socket still serves.
    answer = await conn.send_text(frame("message.send", f'{{"to": "{bob.aid}", "payload": {{"n": {SAFE}, "m": -{SAFE}, "x": 1e-300}}}}'))
    assert answer["result"]["seq"] == 1, answer
    await conn.close()


async def test_every_param_is_checked_and_deep_nesting_is_refused(gateway: GatewayServer) -> None:
    alice = await raw_register(gateway, unique_name("alice"))
    conn = await alice.connect(gateway)
    group = (await conn.call("group.create", {"group_id": unique_name("room")}))["result"]["group"]["group_id"]
    answer = await conn.send_text(frame("group.send", f'{{"group_id": "{group}", "payload": {{"type": "text"}}, "extra": [[1e400]]}}'))
    assert refused_field(answer) == "extra[0][0]"
    deep = "[" * 80 + "]" * 80
    answer = await conn.send_text(frame("group.send", f'{{"group_id": "{group}", "payload": {{"type": "text", "deep": {deep}}}}}'))
    assert refused_field(answer).startswith("payload.deep[0][0]") and "nested deeper" in error_of(answer)["message"]
    assert gateway.core.groups.get(group).message_seq == 0  # type: ignore[union-attr]
    # Before auth.connect too: a pre-auth method's params are checked the same way.
    fresh = await RawConnection.open(gateway)
    assert refused_field(await fresh.send_text(frame("auth.refresh_token", f'{{"refresh_token": "x", "n": {SAFE + 1}}}'))) == "n"
    await fresh.close()
    await conn.close()


async def test_a_request_id_no_client_can_read_back_is_an_invalid_request(gateway: GatewayServer) -> None:
    conn = await RawConnection.open(gateway)
    for request_id in (str(SAFE + 1), "1e300"):
        answer = await conn.send_text(f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "meta.ping"}}')
        assert answer["id"] is None and error_of(answer)["code"] == -32600
    answer = await conn.send_text(f'{{"jsonrpc": "2.0", "id": {SAFE}, "method": "meta.ping"}}')
    assert answer["id"] == SAFE
    await conn.close()


def test_the_gateway_never_writes_nan_or_infinity() -> None:
    with pytest.raises(ValueError):
        dumps({"n": float("inf")})
    with pytest.raises(ValueError):
        dumps({"n": float("nan")})


#: Values no seq, cursor or page size can be: past what SQLite stores, negative, no integer at all.
BAD_INTEGERS = [str(2**63), str(2**64 + 5), str(SAFE + 1), "-1", "1.5", "true", '"3"', "1e400", "[]"]


@pytest.mark.parametrize(
    ("method", "name"),
    [("group.v2.pull", "after_seq"), ("group.v2.pull", "limit"), ("group.v2.pull", "ack_up_to_seq"),
     ("group.pull_events", "after_event_seq"), ("group.pull_events", "limit"), ("group.v2.ack", "up_to_seq"),
     ("group.ack_events", "event_seq"), ("message.v2.pull", "after_seq"), ("message.v2.ack", "up_to_seq")],
)
async def test_numeric_params_out_of_range_are_invalid_params_not_internal_errors(
    gateway: GatewayServer, method: str, name: str
) -> None:
    alice = await raw_register(gateway, unique_name("alice"))
    conn = await alice.connect(gateway)
    group = (await conn.call("group.create", {"group_id": unique_name("room")}))["result"]["group"]["group_id"]
    params = {"group_id": group, "sender_aid": alice.aid, "up_to_seq": 0, "event_seq": 0}
    params.pop(name, None)
    for value in BAD_INTEGERS:
        answer = await conn.send_text(frame(method, json.dumps(params)[:-1] + f', "{name}": {value}}}'))
        assert refused_field(answer) == name, (value, answer)
    assert "result" in await conn.call(method, {**params, name: 1 if name == "limit" else 0})
    await conn.close()


@pytest.mark.parametrize("client_time", ["nan", "NaN", "inf", "-inf", "1e400", "soon", "0x10"])
async def test_a_login_clock_that_is_no_finite_number_is_a_bad_clock(
    gateway: GatewayServer, client_time: str, caplog: pytest.LogCaptureFixture
) -> None:
    login = await start_login(gateway, unique_name("alice"))
    caplog.set_level(logging.INFO, "aun_runtime.gateway")
    proof = login.proof()
    proof["client_time"] = client_time
    signature = login.key.sign(f"{proof['nonce']}:{client_time}".encode(), ec.ECDSA(hashes.SHA256()))
    proof["signature"] = base64.b64encode(signature).decode()  # a valid proof: only the clock is wrong
    answer = await login.conn.call("auth.aid_login2", proof)
    assert refused_field(answer) == "client_time", answer
    assert "check the clock" in error_of(answer)["message"]
    [line] = [r for r in caplog.records if "client_time" in r.getMessage()]
    assert line.exc_info is None
    assert gateway.events.find("auth.login", aid=login.aid) == []
    await login.conn.close()


async def test_a_late_clock_gets_the_same_error(gateway: GatewayServer) -> None:
    login = await start_login(gateway, unique_name("alice"))
    proof = login.proof()
    proof["client_time"] = str(float(proof["client_time"]) - 3600)
    answer = await login.conn.call("auth.aid_login2", proof)
    assert refused_field(answer) == "client_time" and "check the clock" in error_of(answer)["message"]
    await login.conn.close()


# -- with the real client on the receiving side ----------------------------------------------------


async def _ordinary_messages_arrive(conn: RawConnection, events: Events, count: int, send: dict[str, Any]) -> None:
    for index in range(count):
        answer = await conn.call(send["method"], {**send["params"], "payload": {"type": "text", "text": f"m{index}"}})
        assert "result" in answer, answer
    texts = [event["payload"]["text"] for event in await events.take(count, timeout=20)]
    assert texts == [f"m{index}" for index in range(count)]


async def test_poison_in_a_direct_message_is_refused_and_the_real_client_keeps_receiving(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    mallory = await raw_register(gateway, unique_name("mallory"))
    bob = await make_agent(unique_name("bob"))
    events = Events(bob, "message.received")
    conn = await mallory.connect(gateway)
    answers = [await conn.send_text(frame("message.send", f'{{"to": "{bob.aid}", "payload": {{"type": "json", "data": {{"n": {value}}}}}}}'))
               for value in (str(SAFE + 2), "1e400")]
    await _ordinary_messages_arrive(conn, events, 20, {"method": "message.send", "params": {"to": bob.aid}})
    assert [refused_field(answer) for answer in answers] == ["payload.data.n", "payload.data.n"]
    assert bob.is_ready
    await conn.close()


async def test_poison_in_a_group_is_refused_and_every_member_keeps_receiving(
    gateway: GatewayServer, make_agent: AgentFactory
) -> None:
    mallory = await raw_register(gateway, unique_name("mallory"))
    bob, carol = await make_agent(unique_name("bob")), await make_agent(unique_name("carol"))
    conn = await mallory.connect(gateway)
    group = (await conn.call("group.create", {"group_id": unique_name("room")}))["result"]["group"]["group_id"]
    for member in (bob, carol):
        assert "result" in await conn.call("group.add_member", {"group_id": group, "aid": member.aid})
    inboxes = [Events(bob, "group.message_created"), Events(carol, "group.message_created")]
    answers = [await conn.send_text(frame("group.send", f'{{"group_id": "{group}", "payload": {{"type": "text", "text": "x", "n": {value}}}}}'))
               for value in (str(-(SAFE + 2)), "1e400")]
    for index in range(20):
        assert "result" in await conn.call("group.send", {"group_id": group, "payload": {"type": "text", "text": f"m{index}"}})
    for inbox in inboxes:
        texts: list[str] = []
        while len(texts) < 20:
            event = await inbox.next(timeout=20)
            if isinstance(event.get("payload"), dict) and "text" in event["payload"]:
                texts.append(event["payload"]["text"])
        assert texts == [f"m{index}" for index in range(20)]
    assert [refused_field(answer) for answer in answers] == ["payload.n", "payload.n"]
    assert bob.is_ready and carol.is_ready
    await conn.close()
