"""The infrastructure names `aun_runtime.testing` used to export are still found there, with a warning
that names their new home; they are not part of its `__all__`."""

from __future__ import annotations

import pytest

import aun_runtime.testing as testing
from aun_runtime.testing import infrastructure


def test_a_moved_name_is_found_with_a_warning_that_names_its_home() -> None:
    with pytest.warns(DeprecationWarning, match=r"moved to aun_runtime\.testing\.infrastructure\.PostgresServer"):
        moved = testing.PostgresServer
    assert moved is infrastructure.PostgresServer
    assert "PostgresServer" not in testing.__all__


def test_from_import_of_a_moved_name_still_works() -> None:
    with pytest.warns(DeprecationWarning):
        from aun_runtime.testing import PrivateNetwork
    assert PrivateNetwork is infrastructure.PrivateNetwork


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        testing.Nothing  # noqa: B018
