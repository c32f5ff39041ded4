"""Errors a user meets while writing an application say what to do about them."""

from __future__ import annotations

import pytest

from aun_runtime import RPCForbiddenError
from aun_runtime.base._payload import coerce_payload
from protocols.errors import InvalidMessageError


@pytest.mark.parametrize("payload", [{"foo": 1}, {"type": 1, "text": "hi"}, {}])
def test_a_dict_payload_without_a_type_says_how_to_write_one(payload: dict[str, object]) -> None:
    with pytest.raises(InvalidMessageError, match=r"needs a string 'type'") as caught:
        coerce_payload(payload, None)
    message = str(caught.value)
    assert "{'type': 'text', 'text': ...}" in message
    assert "{'type': 'json', 'kind': ..., 'data': ...}" in message
    assert "string" in message and "contract instance" in message
    assert caught.value.field == "payload.type"


def test_a_dict_payload_with_a_type_is_still_accepted() -> None:
    assert coerce_payload({"type": "text", "text": "hi"}, None).type == "text"


def test_rpc_refusal_names_the_way_out_for_plain_autogen_core_agents_too() -> None:
    message = str(RPCForbiddenError())
    assert "agent.send" in message
    assert "self.publish_message(message, TopicId(" in message
    assert "\n" not in message
