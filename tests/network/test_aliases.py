"""The gateway agent's names moved to aun_runtime.network; aun_runtime.gateway still hands them out, warning."""

from __future__ import annotations

import importlib

import pytest

import aun_runtime.gateway as gateway
import aun_runtime.network as network
from aun_runtime.base import _errors

#: What aun_runtime.gateway exported for the gateway agent: all of aun_runtime.network's names but
#: the one added with the package.
MOVED = sorted(set(network.__all__) - {"quiet_client"})


def test_the_gateway_package_still_answers_for_every_name_it_exported() -> None:
    assert set(MOVED) == gateway._MOVED_TO_NETWORK
    assert "GatewayAgent" in MOVED and "OutboxFullError" in MOVED


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_name_from_the_gateway_package_is_the_network_one_and_warns(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"from aun_runtime\.network import {name}\b"):
        moved = getattr(gateway, name)
    assert moved is getattr(network, name)


def test_from_import_of_a_moved_name_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match="aun_runtime.network"):
        from aun_runtime.gateway import GatewayAgent
    assert GatewayAgent is network.GatewayAgent


def test_the_gateway_package_lists_only_the_server() -> None:
    assert not set(gateway.__all__) & set(network.__all__)
    with pytest.raises(AttributeError):
        _ = gateway.NoSuchName


def test_both_packages_list_names_that_exist() -> None:
    for module in (gateway, network):
        assert module.__all__ == sorted(module.__all__, key=lambda n: (n[0].islower(), n))
        for name in module.__all__:
            assert hasattr(module, name)


def test_the_outbox_raises_the_one_outbox_full_error() -> None:
    assert network.OutboxFullError is _errors.OutboxFullError
    assert importlib.import_module("aun_runtime.network._outbox").OutboxFullError is _errors.OutboxFullError
