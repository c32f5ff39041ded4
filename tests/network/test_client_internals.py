"""Every private member of the pinned AUN client that the gateway agent reaches, checked on the real
client: an upgrade that moves one fails here, naming it, instead of quietly running without the
adaptation (each accessor then changes nothing)."""

from __future__ import annotations

import inspect
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aun_core import AIDStore
from aun_core.logger import NullLogger

from aun_runtime.gateway import GatewayServer
from aun_runtime.network._client_internals import (
    PRIVATE_MEMBERS,
    STORE_PATHS,
    client_logger,
    database_connection,
    database_path,
    database_stores,
    dns_cache_of,
    frame_decoder,
    key_derivation,
    login_flow,
    register_flow,
    short_call_io,
    store_database,
    token_store,
    transport_io,
    transport_of,
)
from aun_runtime.network._identity import open_client

from .conftest import agent_config, info_of


def _member(owner: Any, name: str) -> Any:
    """`owner`'s `name` as stored (on the instance, else its class), without calling a descriptor."""
    return inspect.getattr_static(owner, name)


def _is_method(owner: Any, name: str, *params: str) -> bool:
    function = _member(type(owner), name)
    return inspect.isfunction(function) and list(inspect.signature(function).parameters)[1:] == list(params)


async def test_every_private_member_reached_is_where_and_what_it_is_expected_to_be(
    tmp_path: Path, gateway: GatewayServer
) -> None:
    config = agent_config(info_of(gateway), tmp_path / "agent")
    aid = f"inside.{gateway.issuer}"
    client = await open_client(aid, config, config.key_seed())
    store = AIDStore(tmp_path / "store", config.key_seed(), logger=NullLogger())
    checked: set[tuple[str, str]] = set()

    def check(owner: str, name: str, ok: bool) -> None:
        assert ok, f"the pinned AUN client has no {name} ({owner}) where the gateway agent expects it"
        checked.add((owner, name))

    # The client's own attributes.
    for name in ("_transport", "_auth", "_token_store", "_log", "_net"):
        check("aun_core.client.AUNClient", name, name in vars(client))
    check("aun_core.aid_store.AIDStore", "_register_flow", "_register_flow" in vars(store))
    check("aun_core.aid_store.AIDStore", "_net", "_net" in vars(store))
    # The transport: how it writes, where its actor comes from, how it reads a frame.
    transport = transport_of(client)
    check("transport", "_ensure_network_actor", _is_method(transport, "_ensure_network_actor"))
    check("transport", "_actor_send", _is_method(transport, "_actor_send", "payload"))
    check("transport", "_network_actor", "_network_actor" in vars(transport))
    check("transport", "_decode_message", isinstance(_member(type(transport), "_decode_message"), staticmethod))
    assert transport_io(transport) is not None and frame_decoder(transport) is not None
    # The one-off calls of both flows.
    for flow in (login_flow(client), register_flow(store)):
        check("login and registration flows", "_short_rpc", callable(_member(type(flow), "_short_rpc")))
        check("login and registration flows", "_short_rpc_io", callable(_member(type(flow), "_short_rpc_io")))
        assert short_call_io(flow) is not None
    # The DNS cache of both holders.
    for holder in (client, store):
        found = dns_cache_of(holder)
        check("network helper (`_net`)", "_conn", found is not None and isinstance(found[1], sqlite3.Connection))
        check("network helper (`_net`)", "_lock", found is not None and hasattr(found[0], "_lock"))
    # Every store path, and the databases they keep.
    stores = database_stores(client)
    check("identity and token stores", "_aid_dbs", all(isinstance(vars(s).get("_aid_dbs"), dict) for s in stores))
    check("identity and token stores", "_get_db", all(_is_method(s, "_get_db", "aid") for s in stores))
    for path in STORE_PATHS:
        holder: Any = client
        for name in path.split("."):
            holder = getattr(holder, name, None)
        assert any(holder is s for s in stores), f"the pinned AUN client keeps no store at {path}"
    database = store_database(token_store(client), aid)
    check("an AID's database", "_db_path", database_path(database) is not None)
    store_database(token_store(client), aid)  # opened on its first use: now it has a connection
    check("an AID's database", "_conn", "_conn" in vars(database))
    assert database_connection(database) is None or isinstance(database_connection(database), sqlite3.Connection)
    # Its logger and its key derivation.
    check("the client's logger", "_min_level", isinstance(vars(client_logger(client)).get("_min_level"), int))
    check("aun_core.keystore", "_utils", callable(getattr(key_derivation(), "derive_master_key", None)))

    assert checked == {(owner, name) for owner, name, _ in PRIVATE_MEMBERS}  # the table lists exactly these
    await client.close()
    store.close()


@pytest.mark.parametrize("thing", [None, object()])
def test_an_accessor_given_something_else_changes_nothing(thing: Any) -> None:
    assert transport_of(thing) is None and transport_io(thing) is None
    assert short_call_io(thing) is None and dns_cache_of(thing) is None
    assert database_stores(thing) == [] and token_store(thing) is None and client_logger(thing) is None
