"""protocols.contract: wire names are unique and namespaced; payloads decode back into their class."""

from __future__ import annotations

import pytest

from protocols import (
    AUNContract,
    ContractNameCollisionError,
    InvalidMessageError,
    JsonPayload,
    decode_contract,
)


class Task(AUNContract, wire_name="tests.first.Task"):
    goal: str


def test_same_class_name_different_wire_names() -> None:
    class Task(AUNContract):  # same __name__ as the module-level one
        steps: int

    assert Task.wire_name != globals()["Task"].wire_name
    assert Task.wire_name.endswith("Task")


def test_a_wire_name_cannot_be_claimed_twice() -> None:
    with pytest.raises(ContractNameCollisionError, match=r"tests\.first\.Task"):

        class Other(AUNContract, wire_name="tests.first.Task"):
            x: int


def test_round_trip_through_a_json_payload() -> None:
    payload = Task(goal="ship it").to_payload()
    assert payload.kind == "tests.first.Task" and payload.data == {"goal": "ship it"}
    assert decode_contract(payload) == Task(goal="ship it")
    assert decode_contract(JsonPayload(kind="nobody.knows", data={})) is None


def test_data_that_does_not_fit_names_the_field() -> None:
    with pytest.raises(InvalidMessageError) as info:
        decode_contract(JsonPayload(kind="tests.first.Task", data={"goal": 3}))
    assert info.value.field == "payload.data.goal"
