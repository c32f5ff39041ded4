"""protocols.aun: identifiers, payloads, mentions, dispatch mode spellings, envelope rules, size bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols import (
    MAX_PAYLOAD_BYTES,
    AIDMention,
    AUNMessage,
    DispatchMode,
    InvalidAIDError,
    InvalidMessageError,
    JsonPayload,
    PayloadTooLargeError,
    ScopeMention,
    TextPayload,
    ToolCallPayload,
    ToolResultPayload,
    UnknownPayload,
    parse_dispatch_mode,
    validate_aid,
    validate_message_id,
)


@pytest.mark.parametrize("aid", ["coder.local", "a.b.c", "my_agent-2.aid.pub", "x1.y-2"])
def test_valid_aids(aid: str) -> None:
    assert validate_aid(aid) == aid


@pytest.mark.parametrize(
    ("aid", "hint"),
    [
        ("Coder.local", "lowercase"),
        ("coder", "no domain"),
        ("coder.", "not of the form"),
        (".local", "not of the form"),
        ("co der.local", "not of the form"),
        ("coder.lo_cal", "not of the form"),
        ("a." + "b" * 260, "characters long"),
    ],
)
def test_invalid_aids_say_why(aid: str, hint: str) -> None:
    with pytest.raises(InvalidAIDError, match=hint):
        validate_aid(aid)


@pytest.mark.parametrize(("aid", "example"), [("Parrot", "parrot.local"), ("coder", "coder.local")])
def test_the_aid_an_error_suggests_is_itself_valid(aid: str, example: str) -> None:
    with pytest.raises(InvalidAIDError, match=rf"e\.g\. '{example}'"):
        validate_aid(aid)
    assert validate_aid(example) == example


def test_no_example_is_suggested_when_lowercasing_and_a_domain_would_not_make_it_valid() -> None:
    with pytest.raises(InvalidAIDError, match="no domain") as caught:
        validate_aid("co der")
    assert "e.g." not in str(caught.value)


@pytest.mark.parametrize(
    ("spelling", "mode"),
    [
        ("broadcast", DispatchMode.BROADCAST),
        ("disabled", DispatchMode.BROADCAST),
        ("mention", DispatchMode.MENTION),
        ("mention-only", DispatchMode.MENTION),
        ("Mention-Only", DispatchMode.MENTION),
    ],
)
def test_both_dispatch_mode_spellings(spelling: str, mode: DispatchMode) -> None:
    assert parse_dispatch_mode(spelling) is mode


def test_the_wire_field_name_mention_mode_is_accepted() -> None:
    raw = {
        "from_aid": "a.local",
        "group_id": "g",
        "payload": {"type": "text", "text": "x"},
        "mention_mode": "mention-only",
    }
    assert AUNMessage.from_dict(raw).dispatch_mode is DispatchMode.MENTION


def test_typed_payloads_parse_by_type() -> None:
    def parse(payload: dict) -> object:  # type: ignore[type-arg]
        return AUNMessage.from_dict({"from_aid": "a.local", "to": "b.local", "payload": payload}).payload

    assert isinstance(parse({"type": "text", "text": "hi"}), TextPayload)
    assert isinstance(parse({"type": "json", "kind": "k", "data": [1], "schema": "s"}), JsonPayload)
    assert isinstance(
        parse({"type": "tool_call", "call_id": "1", "name": "grep", "timeout_ms": 10}), ToolCallPayload
    )
    assert isinstance(
        parse({"type": "tool_result", "call_id": "1", "ok": True, "result": 3}), ToolResultPayload
    )
    assert isinstance(parse({"type": "voice", "url": "u", "seconds": 3}), UnknownPayload)


@given(
    kind=st.text(min_size=1, max_size=20).filter(
        lambda t: t not in {"text", "json", "tool_call", "tool_result"}
    ),
    extra=st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda k: k != "type"),
        st.one_of(
            st.integers(), st.text(max_size=20), st.booleans(), st.none(), st.lists(st.integers(), max_size=3)
        ),
        max_size=5,
    ),
)
def test_unknown_payload_types_survive_a_round_trip_whole(kind: str, extra: dict) -> None:  # type: ignore[type-arg]
    payload = {"type": kind, **extra}
    message = AUNMessage.from_dict({"from_aid": "a.local", "to": "b.local", "payload": payload})
    again = AUNMessage.from_json(message.to_json())
    assert again.payload.model_dump() == payload
    assert again == message


def test_mentions_are_structured_and_text_is_never_scanned() -> None:
    message = AUNMessage(
        from_aid="a.local",
        group_id="g",
        payload=TextPayload(text="@c.local look", mentions=(AIDMention(aid="b.local"),)),
    )
    assert message.mentions_aid("b.local")
    assert not message.mentions_aid("c.local")
    everyone = AUNMessage(
        from_aid="a.local", group_id="g", payload=TextPayload(text="x", mentions=(ScopeMention(),))
    )
    assert everyone.mentions_aid("anyone.local")


def test_exactly_one_of_to_and_group_id() -> None:
    with pytest.raises(InvalidMessageError, match="exactly one"):
        AUNMessage(from_aid="a.local", payload=TextPayload(text="x"))
    with pytest.raises(InvalidMessageError, match="exactly one"):
        AUNMessage(from_aid="a.local", to="b.local", group_id="g", payload=TextPayload(text="x"))


def test_payload_size_bound_applies_to_every_payload_type() -> None:
    big = "y" * (MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(PayloadTooLargeError) as info:
        AUNMessage(from_aid="a.local", to="b.local", payload=JsonPayload(kind="blob", data=big))
    assert info.value.size > MAX_PAYLOAD_BYTES
    with pytest.raises(PayloadTooLargeError):
        AUNMessage.from_dict(
            {"from_aid": "a.local", "to": "b.local", "payload": {"type": "file", "data": big}}
        )
    # escaping is counted: 200k control characters are 1.2 MB of JSON
    with pytest.raises(PayloadTooLargeError):
        AUNMessage(from_aid="a.local", to="b.local", payload=TextPayload(text="\x01" * 200_000))
    just_fits = "z" * (MAX_PAYLOAD_BYTES - 100)
    AUNMessage(from_aid="a.local", to="b.local", payload=TextPayload(text=just_fits))


def test_messages_are_immutable() -> None:
    message = AUNMessage(from_aid="a.local", to="b.local", payload=TextPayload(text="x"))
    with pytest.raises(Exception, match="frozen"):
        message.hops = 3  # type: ignore[misc]


def test_malformed_json_is_an_invalid_message_error() -> None:
    with pytest.raises(InvalidMessageError):
        AUNMessage.from_json("{not json")
    with pytest.raises(InvalidMessageError) as info:
        AUNMessage.from_json(
            '{"from_aid": "a.local", "to": "b.local", "payload": {"type": "tool_call", "call_id": ""}}'
        )
    assert info.value.field is not None and info.value.field.startswith("payload")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"payload": TextPayload(text="\ud800")}, "payload"),
        ({"payload": TextPayload(text="ok"), "thread": "t\udc00"}, "thread"),
        ({"payload": TextPayload(text="ok"), "in_reply_to": "\udfff"}, "in_reply_to"),
    ],
)
def test_text_utf8_cannot_carry_is_refused_on_both_build_paths(fields: dict, field: str) -> None:  # type: ignore[type-arg]
    """A lone surrogate cannot be written as UTF-8 (wire, archive): refused where a message is made."""
    values = {"from_aid": "a.local", "to": "b.local", **fields}
    with pytest.raises(InvalidMessageError, match="lone surrogate") as made:
        AUNMessage(**values)
    assert made.value.field == field
    with pytest.raises(InvalidMessageError, match="lone surrogate"):
        AUNMessage.assemble(**{"message_id": "m-1", **values})
    # Characters outside ASCII are fine, astral ones included.
    fine = AUNMessage(from_aid="a.local", to="b.local", payload=TextPayload(text="é ✓ 😀"), thread="fil ✓")
    assert AUNMessage.from_json(fine.to_json()) == fine


@pytest.mark.parametrize("message_id", ["", "x" * 129, "m\ud83d"])
def test_message_ids_a_sender_chooses_are_checked_with_a_specific_error(message_id: str) -> None:
    with pytest.raises(InvalidMessageError) as refused:
        validate_message_id(message_id)
    assert refused.value.field == "message_id"
    assert validate_message_id("é-✓-1") == "é-✓-1"
