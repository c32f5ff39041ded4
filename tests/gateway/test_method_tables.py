"""The gateway's method tables: every one named `_*_methods`, merged with no method defined twice."""

from __future__ import annotations

import pytest

from aun_runtime.gateway._gateway_core import Method, merge_method_tables
from aun_runtime.gateway._group_aid_methods import GROUP_AID_METHODS, create_with_aid
from aun_runtime.gateway._group_methods import GROUP_METHODS
from aun_runtime.gateway._server import METHODS


async def _answer(call: object) -> dict[str, object]:
    return {}


def test_a_method_in_two_tables_is_an_error_not_a_silent_override() -> None:
    first, second = Method(_answer), Method(_answer, pre_auth=True)
    with pytest.raises(ValueError, match=r"group\.create is defined twice"):
        merge_method_tables({"group.create": first}, {"group.create": second})
    assert merge_method_tables({"a.x": first}, {"b.y": second}) == {"a.x": first, "b.y": second}


def test_the_served_table_holds_each_table_whole_and_one_group_create() -> None:
    assert METHODS["group.create"].handler is create_with_aid
    assert "group.create" not in GROUP_METHODS
    for table in (GROUP_METHODS, GROUP_AID_METHODS):
        assert all(METHODS[name] is method for name, method in table.items())
