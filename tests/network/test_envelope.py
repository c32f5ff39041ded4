"""``AUNMessage`` <-> the AUN wire: what a runtime sends is what the receiving runtime's agent gets,
and what a plain client sends is read the way the AUN payload reference says."""

from __future__ import annotations

import pytest

from aun_runtime.network._envelope import ENVELOPE_KEY, copy_message_id, message_from_event, send_call
from protocols.aun import (
    AUNMessage,
    DispatchMode,
    JsonPayload,
    Payload,
    TextPayload,
    ToolCallPayload,
    ToolResultPayload,
    UnknownPayload,
)
from protocols.errors import InvalidMessageError
from protocols.reflection import CodingTaskMsg

SENDER, RECEIVER = "alice.aun.localhost", "bobby.aun.localhost"

PAYLOADS: list[Payload] = [
    TextPayload(text="hi @bobby", mentions=({"aid": RECEIVER, "offset": 3, "length": 6},)),  # type: ignore[arg-type]
    CodingTaskMsg(task="Print 1", task_id="t1").to_payload(),
    JsonPayload(kind="x.y", data=None, schema="https://example.test/s"),  # type: ignore[call-arg]
    ToolCallPayload(call_id="c1", name="search", arguments={"q": "aun"}, timeout_ms=500),
    ToolResultPayload(call_id="c1", ok=False, error={"code": 7}),
    ToolResultPayload(call_id="c2", ok=True, result=[1, None, {"k": "v"}]),
    UnknownPayload.model_validate({"type": "image", "url": "https://x.test/a.png", "alt": None, "size": [3, 4]}),
]


def _arrive(message: AUNMessage, params: dict[str, object], *, seq: int = 41, group: bool = False) -> AUNMessage:
    event = {"message_id": params["message_id"], "from": message.from_aid, "seq": seq, "payload": params["payload"],
             "t_server": 1_700_000_000_000}
    if group:
        event.update(group_id=params["group_id"], mention_mode="mention-only")
    return message_from_event(event, RECEIVER, group=group)


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p.type)
def test_a_direct_message_arrives_as_it_was_sent(payload: Payload) -> None:
    sent = AUNMessage(from_aid=SENDER, to=RECEIVER, payload=payload, in_reply_to="m-0", thread="m-root", hops=4)
    method, params = send_call(sent, RECEIVER, encrypt=True)
    assert method == "message.send" and params["to"] == RECEIVER and "encrypt" not in params  # E2EE: the default
    got = _arrive(sent, params)
    assert got.payload == payload  # unknown types and explicit nulls included
    assert (got.message_id, got.from_aid, got.to, got.seq) == (sent.message_id, SENDER, RECEIVER, 41)
    assert (got.in_reply_to, got.thread, got.hops, got.created_at) == ("m-0", "m-root", 4, 1_700_000_000_000)


def test_the_wire_payload_uses_the_aun_fields_and_keeps_the_senders_own() -> None:
    own = UnknownPayload.model_validate({"type": "card", "reply_to": {"message_id": "theirs"}, "client_context": {"app": 1}})
    sent = AUNMessage(from_aid=SENDER, to=RECEIVER, payload=own, in_reply_to="ours", thread="t", hops=2)
    _, params = send_call(sent, RECEIVER, encrypt=False)
    assert params["encrypt"] is False
    wire = params["payload"]
    assert isinstance(wire, dict)
    assert wire["reply_to"] == {"message_id": "theirs"} and wire["thread_id"] == "t"  # never overwritten
    assert wire["client_context"] == {"app": 1, ENVELOPE_KEY: {"hops": 2, "added": ["thread_id"]}}
    got = _arrive(sent, params)
    assert got.payload == own and got.in_reply_to == "theirs" and got.hops == 2


def test_a_plain_clients_message_reads_reply_and_thread_from_the_payload_reference_fields() -> None:
    event = {"message_id": "m-9", "from": "user.aun.localhost", "seq": 3, "timestamp": 5,
             "payload": {"type": "text", "text": "and again", "reply_to": {"message_id": "m-1", "seq": 1}, "thread_id": "m-1"}}
    got = message_from_event(event, RECEIVER, group=False)
    assert (got.in_reply_to, got.thread, got.hops, got.created_at, got.text) == ("m-1", "m-1", 0, 5, "and again")


def test_a_network_group_message_keeps_group_seq_and_mode_snapshot() -> None:
    sent = AUNMessage(from_aid=SENDER, group_id="crew.aun.localhost", payload=TextPayload(text="all hands"))
    method, params = send_call(sent, None, encrypt=True)
    assert method == "group.send" and "encrypt" not in params  # E2EE: the default, for groups too
    assert send_call(sent, None, encrypt=False)[1]["encrypt"] is False
    got = _arrive(sent, params, seq=7, group=True)
    assert (got.group_id, got.to, got.seq, got.dispatch_mode) == ("crew.aun.localhost", None, 7, DispatchMode.MENTION)
    assert got.payload == sent.payload


def test_a_local_groups_copy_for_a_member_elsewhere_becomes_that_group_message_again() -> None:
    sent = AUNMessage(from_aid=SENDER, group_id="standup", seq=12, dispatch_mode=DispatchMode.MENTION,
                      payload=TextPayload(text="bobby?", mentions=({"aid": RECEIVER},)))  # type: ignore[arg-type]
    _, params = send_call(sent, RECEIVER, encrypt=True)
    assert params["to"] == RECEIVER and params["message_id"] == copy_message_id(sent.message_id, RECEIVER)
    assert copy_message_id(sent.message_id, "carol.aun.localhost") != params["message_id"]  # one id per member
    got = _arrive(sent, params, seq=99)
    assert (got.message_id, got.group_id, got.to, got.seq, got.dispatch_mode) == (
        sent.message_id, "standup", None, 12, DispatchMode.MENTION)


def test_wire_ids_stay_within_the_networks_limit() -> None:
    assert len(copy_message_id("m" * 128, RECEIVER)) == 128


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"message_id": "m", "from": SENDER, "payload": "just text"}, "payload"),
        ({"message_id": "m", "from": SENDER, "payload": {"type": "text"}}, "payload"),
        ({"message_id": "m", "from": "Not An AID", "payload": {"type": "text", "text": "x"}}, "from_aid"),
        ({"from": SENDER, "payload": {"type": "text", "text": "x"}}, "message_id"),
        ({"message_id": "m", "from": SENDER, "payload": {"type": "tool_result", "call_id": "c", "ok": False}}, "payload"),
    ],
)
def test_an_unusable_arrival_is_a_specific_error(event: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidMessageError) as error:
        message_from_event(event, RECEIVER, group=False)
    assert (error.value.field or "").startswith(field)
