"""Property-based fuzzing of the frame parser and of a live gateway.

Properties: the parser never raises and always yields a request or a specific error; what passes
the parser and the gateway's value check is JSON the AUN client's strict parser reads; a live
gateway answers every fuzzed frame with a well-formed JSON-RPC frame the client can parse, never
an internal error, keeps serving, and never shows the fuzzing AID anything of another AID's inbox
or groups. The frames include what no encoder writes: integers past 2^53-1 and 2^63, 1e400 and
-1e400 (infinity once parsed), 1e300, deep nesting and lone surrogate escapes.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aun_core.org_protocol import _parse_outer_json_strict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection, connect

from aun_runtime.base._strict_json import find_unsafe
from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._errors import ErrorCode
from aun_runtime.gateway._frames import Request, dumps, parse_frame
from tests.conftest import SLOW_MACHINE

from .conftest import RawIdentity, raw_register

SECRET = "bob's secret 7f3a"
KNOWN_CODES = {int(code) for code in ErrorCode}


class Raw(str):
    """JSON text written into a frame as it is: spellings no encoder produces."""


EDGE_TEXTS = [
    str(2**53 - 1), str(-(2**53 - 1)), str(2**53), str(-(2**53)), str(2**63), str(2**64), str(-(2**63) - 1),
    "1e400", "-1e400", "1e300", "-1e16", "9007199254740993.0", "1.0000000000000000001", "1e-400", "-0.0",
    '"\\ud800"', '"x\\udfff"', '"\\ud83d\\ude00"', '"\\udc00\\ud800"', '"\\u0000"',
]
edge_leaf = st.one_of(
    st.sampled_from(EDGE_TEXTS).map(Raw),
    st.integers(min_value=2**53 - 3, max_value=2**70).map(lambda n: Raw(str(n))),
    st.integers(min_value=-(2**70), max_value=-(2**53 - 3)).map(lambda n: Raw(str(n))),
    st.integers(min_value=40, max_value=1500).map(lambda n: Raw("[" * n + "]" * n)),
    st.integers(min_value=40, max_value=120).map(lambda n: Raw('{"a":' * n + "1" + "}" * n)),
)
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30),
    edge_leaf,
)
json_key = st.one_of(st.text(max_size=10), st.sampled_from(['"\\ud800"', '"\\udbff"']).map(Raw))
json_value = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(json_key, children, max_size=4),
    max_leaves=12,
)


def to_json(value: Any) -> str:
    """``value`` as JSON text, :class:`Raw` parts as they are."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{to_json(k) if isinstance(k, Raw) else json.dumps(k)}:{to_json(v)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(to_json, value)) + "]"
    return json.dumps(value)


def relayed(params: dict[str, Any]) -> str:
    """``params`` the way the gateway relays a payload: inside a pushed row, inside a frame."""
    return dumps({"jsonrpc": "2.0", "method": "event/message.received",
                  "params": {"inline_message": {"legacy_v1": {"payload": params}}}})


@given(st.text(max_size=300))
def test_parser_never_raises_on_text(text: str) -> None:
    parsed = parse_frame(text)
    assert isinstance(parsed, Request) or parsed[1].code in (-32700, -32600, -32602)


@given(json_value)
def test_parser_never_raises_on_any_json(value: Any) -> None:
    parsed = parse_frame(to_json(value))
    if isinstance(parsed, Request):
        assert isinstance(value, dict) and value.get("jsonrpc") == "2.0" and isinstance(parsed.params, dict)
    else:
        assert parsed[1].code in (-32700, -32600, -32602)


@given(json_value)
def test_what_passes_the_checks_is_json_the_client_reads(value: Any) -> None:
    parsed = parse_frame(to_json({"jsonrpc": "2.0", "id": 1, "method": "message.send", "params": {"payload": value}}))
    if isinstance(parsed, tuple):
        assert parsed[1].code in (-32700, -32602)
        return
    unsafe = find_unsafe(parsed.params)
    if unsafe is None:
        _parse_outer_json_strict(relayed(parsed.params))  # raises if a client would refuse it
    else:
        path, _ = unsafe
        assert path == "payload" or path.startswith(("payload.", "payload["))


class LiveGateway:
    """A gateway on its own event loop thread, with a victim (bob) whose data must never leak."""

    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = GatewayServer(port=0, data_dir=data_dir)
        self.run(self.server.start())
        self.bob, self.mallory = self.run(raw_register(self.server, "bob-victim")), self.run(
            raw_register(self.server, "mallory"))
        alice = self.run(raw_register(self.server, "alice-friend"))
        self.group = self.run(self._victim_data(alice))
        self.run(self._own_group())

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    async def _victim_data(self, alice: RawIdentity) -> str:
        conn = await alice.connect(self.server)
        await conn.call("message.send", {"to": self.bob.aid, "payload": {"type": "text", "text": SECRET}})
        group = (await conn.call("group.create", {"group_id": "secret-room"}))["result"]["group"]["group_id"]
        await conn.call("group.add_member", {"group_id": group, "aid": self.bob.aid})
        await conn.call("group.send", {"group_id": group, "payload": {"type": "text", "text": SECRET}})
        await conn.close()
        return str(group)

    async def _own_group(self) -> None:
        """A group of mallory's own, so that group calls get past membership to their numbers."""
        conn = await self.mallory.connect(self.server, device_id="mallory-setup")
        await conn.call("group.create", {"group_id": "mallory-room"})
        await conn.call("group.send", {"group_id": "mallory-room", "payload": {"type": "text", "text": "hi"}})
        await conn.close()

    def mallory_socket(self) -> ClientConnection:
        ws = connect(self.server.url, max_size=4 * 1024 * 1024)
        challenge = json.loads(ws.recv(timeout=10))
        ws.send(json.dumps({"jsonrpc": "2.0", "id": "c", "method": "auth.connect", "params": {
            "nonce": challenge["params"]["nonce"], "auth": {"token": self.mallory.access_token},
            "device": {"id": "mallory-device"}}}))
        assert json.loads(ws.recv(timeout=10))["result"]["status"] == "ok"
        return ws

    def close(self) -> None:
        self.run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    gateway = LiveGateway(tmp_path_factory.mktemp("fuzz") / "gateway")
    yield gateway
    gateway.close()


METHODS = [
    "message.send", "message.peers", "message.v2.pull", "message.v2.ack", "message.v2.put_peer_pk",
    "message.v2.bootstrap", "group.create", "group.add_member", "group.get_members", "group.set_settings",
    "group.send", "group.v2.pull", "group.v2.ack", "group.pull_events", "group.ack_events", "group.list_my",
    "group.get_online_members", "auth.connect", "auth.refresh_token", "auth.aid_login1", "meta.status",
]
FIELDS = ["to", "sender_aid", "group_id", "aid", "device_id", "slot_id", "payload", "after_seq", "limit", "message_id",
          "up_to_seq", "settings", "cursor_scope", "filter", "page_token", "peer_aid", "event_seq", "ack_up_to_seq",
          "client_signature", "from_aid", "role"]
NUMERIC_FIELDS = ["after_seq", "after_event_seq", "limit", "up_to_seq", "event_seq", "ack_up_to_seq", "spk_timestamp"]
VICTIM_VALUES = st.sampled_from(["bob-victim.aun.localhost", "secret-room.aun.localhost", "secret-room", "mallory-room",
                                 "mallory-room", 0, 1, 200])
params_strategy = st.dictionaries(st.sampled_from(FIELDS), st.one_of(VICTIM_VALUES, json_value, edge_leaf), max_size=6)
# Params that get past recipient and membership checks, so their numbers and payloads are what is
# judged: a message to bob, a post to mallory's own group, pulls and acks with edge values.
edge_number = st.one_of(edge_leaf, st.integers(), st.booleans(), st.floats(), st.sampled_from([0, 1, 50, "3"]))
edge_payload = st.dictionaries(json_key, st.one_of(json_value, edge_leaf), min_size=1, max_size=3)
shaped_params = st.fixed_dictionaries(
    {"to": st.just("bob-victim.aun.localhost"), "group_id": st.just("mallory-room"),
     "sender_aid": st.just("mallory.aun.localhost")},
    optional={"payload": edge_payload, **{name: edge_number for name in NUMERIC_FIELDS}},
)


def _nest(keys: list[str | int], leaf: Any) -> Any:
    for key in reversed(keys):
        leaf = [leaf] if isinstance(key, int) else {key: leaf}
    return leaf


#: Valid params for every targeted method: one probe (below) replaces one of them.
VALID_PARAMS: dict[str, Any] = {
    "to": "bob-victim.aun.localhost", "group_id": "mallory-room", "sender_aid": "mallory.aun.localhost",
    "payload": {"type": "text", "text": "hi"}, "up_to_seq": 0, "event_seq": 0, "spk_id": "s", "spk_pk": "p",
    "spk_signature": "sig", "spk_timestamp": 1,
}
probe = st.one_of(
    st.tuples(st.just("payload"), st.tuples(st.lists(st.one_of(st.text(max_size=4), st.just(0)), max_size=3), edge_leaf)
              .map(lambda found: {"type": "json", "data": _nest(*found)})),
    st.tuples(st.sampled_from(NUMERIC_FIELDS), edge_number),
)
request_strategy = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0"]), "method": st.one_of(st.sampled_from(METHODS), st.text(max_size=20)),
     "params": st.one_of(params_strategy, shaped_params, shaped_params, json_value)},
    optional={"id": st.one_of(st.integers(), st.text(max_size=20), st.none(), json_value)},
)
frame_strategy = st.one_of(request_strategy.map(to_json), st.text(max_size=200))


def exchange(live: LiveGateway, frame: str) -> None:
    """Send ``frame`` as mallory and check every frame that comes back, then bob's data."""
    ws = live.mallory_socket()
    try:
        ws.send(frame)
        # A ping behind the fuzzed frame: every frame before its answer belongs to the fuzzed one
        # (at most one answer, none for a notification) or is a push.
        ws.send(json.dumps({"jsonrpc": "2.0", "id": "alive", "method": "meta.ping", "params": {}}))
        answers = []
        while True:
            text = str(ws.recv(timeout=10))
            assert SECRET not in text
            received = _parse_outer_json_strict(text)  # every frame is one the AUN client reads
            assert received.get("jsonrpc") == "2.0"
            if received.get("id") == "alive" and "result" in received:
                assert received["result"]["pong"] is True
                break
            if "method" not in received:
                answers.append(received)
        assert len(answers) <= 1
        for answer in answers:
            assert ("result" in answer) != ("error" in answer)
            assert "secret-room" not in json.dumps(answer.get("result", {}))
            if "error" in answer:
                assert answer["error"]["code"] != -32603, answer  # never an internal error
                assert answer["error"]["code"] in KNOWN_CODES, answer
    finally:
        ws.close()
    # Nothing mallory sent touched bob's messages from alice.
    rows, _ = live.server.core.inboxes.pull("bob-victim.aun.localhost", "alice-friend.aun.localhost", 0, 10)
    assert [row["legacy_v1"]["payload"]["text"] for row in rows] == [SECRET]
    # What mallory got stored, for bob and in its own group, every client reads.
    head = live.server.core.inboxes.peer_head("bob-victim.aun.localhost", live.mallory.aid)
    mine, _ = live.server.core.inboxes.pull("bob-victim.aun.localhost", live.mallory.aid, max(0, head - 1), 1)
    posted, _ = live.server.core.groups.messages("mallory-room.aun.localhost", 0, 1000)
    _parse_outer_json_strict(relayed({"direct": mine, "group": posted[-1:]}))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *SLOW_MACHINE])
@given(frame=frame_strategy)
def test_live_gateway_survives_fuzz_and_leaks_nothing(live: LiveGateway, frame: str) -> None:
    exchange(live, frame)


TARGETED = ["message.send", "group.send", "group.v2.pull", "group.pull_events", "group.v2.ack", "group.ack_events",
            "message.v2.pull", "message.v2.ack", "message.v2.put_peer_pk", "message.peers"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *SLOW_MACHINE])
@given(method=st.sampled_from(TARGETED), change=probe)
def test_live_gateway_never_stores_or_answers_what_a_client_cannot_read(
    live: LiveGateway, method: str, change: tuple[str, Any]
) -> None:
    field, value = change
    exchange(live, to_json({"jsonrpc": "2.0", "id": "f", "method": method, "params": {**VALID_PARAMS, field: value}}))
