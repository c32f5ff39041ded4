"""AUNMessage.assemble gives what validation gives: the same message, or the same error."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

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
    {"message_id": "m4", "from_aid": "a.local", "to": "b.local", "payload": ToolResultPayload(call_id="c", ok=True)},
]


@pytest.mark.parametrize("fields", GOOD)
def test_the_same_message_as_validation_builds(fields: dict[str, Any]) -> None:
    fast = AUNMessage.assemble(**fields)
    checked = AUNMessage(**fields, created_at=fast.created_at)
    assert fast == checked
    assert fast.to_json() == checked.to_json()
    assert fast.model_dump() == checked.model_dump()
    assert AUNMessage.from_json(fast.to_json()) == fast
    assert pickle.loads(pickle.dumps(fast)) == fast
    assert copy.deepcopy(fast) == fast
    changed = fast.model_copy(update={"hops": 9})
    assert changed.hops == 9 and '"hops":9' in changed.to_json()  # a copy never reuses the cached JSON


BAD: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"from_aid": "A.local", "to": "b.local"}, InvalidAIDError),
    ({"from_aid": "a.local", "to": "nodomain"}, InvalidAIDError),
    ({"from_aid": "a.local", "to": "b.local", "group_id": "team"}, InvalidMessageError),
    ({"from_aid": "a.local"}, InvalidMessageError),
    ({"from_aid": "a.local", "to": "b.local", "message_id": ""}, Exception),
    ({"from_aid": "a.local", "to": "b.local", "hops": -1}, Exception),
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
