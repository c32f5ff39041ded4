"""Property-based fuzzing of the frame parser and of a live gateway.

Properties: the parser never raises and always yields a request or a specific error; a live
gateway answers every fuzzed frame with a well-formed JSON-RPC frame, never an internal error, keeps
serving, and never shows the fuzzing AID anything of another AID's inbox or groups.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection, connect

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._errors import ErrorCode
from aun_runtime.gateway._frames import Request, parse_frame

from .conftest import RawIdentity, raw_register

SECRET = "bob's secret 7f3a"
KNOWN_CODES = {int(code) for code in ErrorCode}

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))
json_value = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


@given(st.text(max_size=300))
def test_parser_never_raises_on_text(text: str) -> None:
    parsed = parse_frame(text)
    assert isinstance(parsed, Request) or parsed[1].code in (-32700, -32600, -32602)


@given(json_value)
def test_parser_never_raises_on_any_json(value: Any) -> None:
    parsed = parse_frame(json.dumps(value))
    if isinstance(parsed, Request):
        assert isinstance(value, dict) and value.get("jsonrpc") == "2.0" and isinstance(parsed.params, dict)
    else:
        assert parsed[1].code in (-32600, -32602)


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
VICTIM_VALUES = st.sampled_from(["bob-victim.aun.localhost", "secret-room.aun.localhost", "secret-room", 0, 1, 200])
params_strategy = st.dictionaries(st.sampled_from(FIELDS), st.one_of(VICTIM_VALUES, json_value), max_size=6)
request_strategy = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0"]), "method": st.one_of(st.sampled_from(METHODS), st.text(max_size=20)),
     "params": st.one_of(params_strategy, params_strategy, json_value)},
    optional={"id": st.one_of(st.integers(), st.text(max_size=20), st.none(), json_value)},
)
frame_strategy = st.one_of(request_strategy.map(json.dumps), st.text(max_size=200))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=frame_strategy)
def test_live_gateway_survives_fuzz_and_leaks_nothing(live: LiveGateway, frame: str) -> None:
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
            received = json.loads(text)
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
                assert answer["error"]["code"] in KNOWN_CODES and answer["error"]["code"] != -32603, answer
    finally:
        ws.close()
    # Nothing mallory sent touched bob's messages from alice.
    rows, _ = live.server.core.inboxes.pull("bob-victim.aun.localhost", "alice-friend.aun.localhost", 0, 10)
    assert [row["legacy_v1"]["payload"]["text"] for row in rows] == [SECRET]
