"""AUNMessage.assemble gives what validation gives: the same message, or the same error."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.aun import (
    AUNMessage,
    DispatchMode,
    JsonPayload,
    TextPayload,
    ToolResultPayload,
    UnknownPayload,
)
from protocols.errors import InvalidAIDError, InvalidMessageError, PayloadTooLargeError

GOOD: list[dict[str, Any]] = [
    {"message_id": "m1", "from_aid": "a.local", "to": "b.local", "payload": TextPayload(text="hi"), "seq": 1},
    {
        "message_id": "m2",
        "from_aid": "a.local",
        "group_id": "team",
        "payload": JsonPayload(kind="x.Y", data={"k": [1, 2]}),
        "seq": 7,
        "in_reply_to": "m1",
        "thread": "m1",
        "hops": 3,
        "dispatch_mode": DispatchMode.MENTION,
    },
    {"message_id": "m3", "from_aid": "a.local", "to": "b.local", "payload": UnknownPayload(type="loc", lat=1)},
    {
        "message_id": 'm"5\\\n\x01',
        "from_aid": "a.local",
        "to": "b.local",
        "payload": JsonPayload(kind="k", data={"é": None}, schema="urn:x"),  # type: ignore[call-arg]
        "thread": "naïve ✓",
    },
    {"message_id": "m4", "from_aid": "a.local", "to": "b.local", "payload": ToolResultPayload(call_id="c", ok=True)},
]


@pytest.mark.parametrize("fields", GOOD)
def test_the_same_message_as_validation_builds(fields: dict[str, Any]) -> None:
    fast = AUNMessage.assemble(**fields)
    checked = AUNMessage(**fields, created_at=fast.created_at)
    assert fast == checked
    assert fast.to_json() == checked.to_json() == _pydantic_json(checked)
    assert fast.model_dump() == checked.model_dump()
    assert AUNMessage.from_json(fast.to_json()) == fast
    assert pickle.loads(pickle.dumps(fast)) == fast
    assert copy.deepcopy(fast) == fast
    changed = fast.model_copy(update={"hops": 9})
    assert changed.hops == 9 and '"hops":9' in changed.to_json()  # a copy never reuses the cached JSON


def _pydantic_json(message: AUNMessage) -> str:
    """What pydantic writes for the message, unset envelope fields left out."""
    optional = ("to", "group_id", "seq", "in_reply_to", "thread", "dispatch_mode")
    return message.model_dump_json(by_alias=True, exclude={n for n in optional if getattr(message, n) is None})


BAD: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"from_aid": "A.local", "to": "b.local"}, InvalidAIDError),
    ({"from_aid": "a.local", "to": "nodomain"}, InvalidAIDError),
    ({"from_aid": "a.local", "to": "b.local", "group_id": "team"}, InvalidMessageError),
    ({"from_aid": "a.local"}, InvalidMessageError),
    ({"from_aid": "a.local", "to": "b.local", "message_id": ""}, Exception),
    ({"from_aid": "a.local", "to": "b.local", "hops": -1}, Exception),
    ({"from_aid": "a.local", "to": ["b.local"]}, Exception),
    ({"from_aid": "a.local", "to": "b.local", "payload": TextPayload(text="x" * 1_000_001)}, PayloadTooLargeError),
]


@pytest.mark.parametrize(("overrides", "error"), BAD)
def test_the_same_errors_as_validation_raises(overrides: dict[str, Any], error: type[Exception]) -> None:
    fields: dict[str, Any] = {"message_id": "m", "payload": TextPayload(text="hi"), **overrides}
    with pytest.raises(error) as checked:
        AUNMessage(**fields)
    with pytest.raises(error) as fast:
        AUNMessage.assemble(**fields)
    assert type(fast.value) is type(checked.value)
    assert str(fast.value) == str(checked.value)


_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)


@given(
    message_id=_text.filter(bool),
    text=_text,
    thread=st.none() | _text,
    in_reply_to=st.none() | _text,
    seq=st.none() | st.integers(min_value=0, max_value=2**63),
    hops=st.integers(min_value=0, max_value=1000),
    group=st.booleans(),
    mentioned=st.booleans(),
    text_format=st.sampled_from(["plain", "markdown", 'we"ird\n']),
)
def test_to_json_writes_exactly_what_pydantic_writes(
    message_id: str,
    text: str,
    thread: str | None,
    in_reply_to: str | None,
    seq: int | None,
    hops: int,
    group: bool,
    mentioned: bool,
    text_format: str,
) -> None:
    message = AUNMessage(
        message_id=message_id[:128],
        from_aid="a.local",
        to=None if group else "b.local",
        group_id="team" if group else None,
        dispatch_mode=DispatchMode.BROADCAST if group else None,
        payload=TextPayload(text=text, format=text_format, mentions=({"aid": "b.local"},) if mentioned else ()),
        seq=seq,
        thread=thread,
        in_reply_to=in_reply_to,
        hops=hops,
    )
    assert message.to_json() == _pydantic_json(message)
    assert AUNMessage.from_json(message.to_json()) == message
