"""The pinned AUN client's private members: the one module of network/ that reaches them.

The gateway agent holds a thousand AUN clients in one process, which the client (`CLIENT_PACKAGE`)
is not written for; `._client_io`, `._identity` and `._frame_guard` adapt it (no thread per
connection, one database connection per AID, a guard on its frame decoder...). Each private member
they need is reached through one accessor here, named for what it reaches, so that an upgrade of the
client is checked in one place: `PRIVATE_MEMBERS` lists every member with its owner and kind, and
`tests/network/test_client_internals.py` fails loudly, naming the member, when the pinned client
no longer has one where and as expected. Every accessor tolerates a missing member (it returns None
or False, and the caller then changes nothing), so a different client runs as it comes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = [
    "PRIVATE_MEMBERS",
    "STORE_PATHS",
    "client_logger",
    "database_connection",
    "database_path",
    "database_stores",
    "dns_cache_of",
    "frame_decoder",
    "key_derivation",
    "login_flow",
    "network_actor",
    "register_flow",
    "replace_frame_decoder",
    "replace_short_calls",
    "replace_transport_io",
    "set_log_floor",
    "set_network_actor",
    "share_dns_connection",
    "short_call_io",
    "store_database",
    "store_databases",
    "token_store",
    "transport_io",
    "transport_of",
]

#: Every private member reached here: (owner, member, kind). Kinds: `attribute` (an instance's),
#: `method` (a function of the owner's class), `staticmethod`, `module`.
PRIVATE_MEMBERS: tuple[tuple[str, str, str], ...] = (
    ("aun_core.client.AUNClient", "_transport", "attribute"),
    ("aun_core.client.AUNClient", "_auth", "attribute"),
    ("aun_core.client.AUNClient", "_token_store", "attribute"),
    ("aun_core.client.AUNClient", "_log", "attribute"),
    ("aun_core.client.AUNClient", "_net", "attribute"),
    ("aun_core.aid_store.AIDStore", "_register_flow", "attribute"),
    ("aun_core.aid_store.AIDStore", "_net", "attribute"),
    ("transport", "_ensure_network_actor", "method"),
    ("transport", "_actor_send", "method"),
    ("transport", "_network_actor", "attribute"),
    ("transport", "_decode_message", "staticmethod"),
    ("login and registration flows", "_short_rpc", "method"),
    ("login and registration flows", "_short_rpc_io", "method"),
    ("network helper (`_net`)", "_conn", "attribute"),
    ("network helper (`_net`)", "_lock", "attribute"),
    ("identity and token stores", "_aid_dbs", "attribute"),
    ("identity and token stores", "_get_db", "method"),
    ("an AID's database", "_db_path", "attribute"),
    ("an AID's database", "_conn", "attribute"),
    ("the client's logger", "_min_level", "attribute"),
    ("aun_core.keystore", "_utils", "module"),
)

#: Where the pinned client keeps stores that open the AID's ``aun.db`` (each with ``_aid_dbs``),
#: as attribute paths from the client.
STORE_PATHS = ("_token_store", "_aid_store._token_store", "_aid_store._keystore", "_auth._token_store",
               "_aid_store._peer_auth._token_store", "_aid_store._register_flow._keystore",
               "_aid_store._register_flow._certs._store")


# -- the transport: the WebSocket and its network actor ------------------------------------------------


def transport_of(client: Any) -> Any | None:
    """`client._transport`: the object that holds the client's WebSocket."""
    return getattr(client, "_transport", None)


def transport_io(transport: Any) -> Callable[[str], Any] | None:
    """`transport._actor_send`, if the transport also has `_ensure_network_actor` (both methods of
    its class): how it writes a frame, and the seam that gives it a network actor."""
    if transport is None or not all(callable(getattr(type(transport), name, None))
                                    for name in ("_ensure_network_actor", "_actor_send")):
        return None
    send: Callable[[str], Any] = transport._actor_send
    return send


def replace_transport_io(transport: Any, ensure_actor: Callable[[], Any], send: Callable[[str], Any]) -> None:
    """Set `transport._ensure_network_actor` and `transport._actor_send` on the instance (which wins
    over the class's methods): where its actor comes from, and how it writes a frame."""
    transport._ensure_network_actor = ensure_actor
    transport._actor_send = send


def network_actor(transport: Any) -> Any:
    """`transport._network_actor`: the actor running its I/O (None until one is made)."""
    return getattr(transport, "_network_actor", None)


def set_network_actor(transport: Any, actor: Any) -> None:
    """Make `actor` the transport's `_network_actor`."""
    transport._network_actor = actor


def frame_decoder(transport: Any) -> Callable[[Any], dict[str, Any]] | None:
    """`type(transport)._decode_message`: the staticmethod that parses each frame received."""
    decoder: Callable[[Any], dict[str, Any]] | None = getattr(type(transport), "_decode_message", None)
    return decoder if transport is not None else None


def replace_frame_decoder(transport: Any, decode: Callable[[Any], dict[str, Any]]) -> None:
    """Set `transport._decode_message` on the instance (which wins over the class's staticmethod)."""
    transport._decode_message = decode


# -- one-off calls of the login and registration flows -----------------------------------------------


def login_flow(client: Any) -> Any | None:
    """`client._auth`: the flow that logs the client in (and renews its tokens)."""
    return getattr(client, "_auth", None)


def register_flow(store: Any) -> Any | None:
    """`store._register_flow`: the `AIDStore`'s registration flow."""
    return getattr(store, "_register_flow", None)


def short_call_io(flow: Any) -> Callable[..., Any] | None:
    """`flow._short_rpc_io`, if the flow also has `_short_rpc`: the one-off call on a WebSocket
    of its own, without the thread `_short_rpc` starts around it."""
    direct = getattr(flow, "_short_rpc_io", None)
    if not callable(direct) or not callable(getattr(flow, "_short_rpc", None)):
        return None
    return direct  # type: ignore[no-any-return]


def replace_short_calls(flow: Any, call: Callable[..., Any]) -> None:
    """Set `flow._short_rpc` on the instance: how the flow makes its one-off calls."""
    flow._short_rpc = call


# -- the DNS cache -------------------------------------------------------------------------------------


def dns_cache_of(holder: Any) -> tuple[Any, sqlite3.Connection] | None:
    """`holder._net` (a client, or its `AIDStore`) and its DNS cache connection `_net._conn`, if
    the helper also has the `_lock` that guards it."""
    net = getattr(holder, "_net", None)
    own = getattr(net, "_conn", None)
    if net is None or not isinstance(own, sqlite3.Connection) or not hasattr(net, "_lock"):
        return None
    return net, own


def share_dns_connection(net: Any, connection: sqlite3.Connection, lock: threading.Lock) -> None:
    """Point the network helper's `_conn` and `_lock` at a DNS cache shared by the process."""
    net._conn, net._lock = connection, lock


# -- identity and token stores, and their databases ----------------------------------------------------


def token_store(client: Any) -> Any | None:
    """`client._token_store`: where its tokens and delivery cursors are kept."""
    return getattr(client, "_token_store", None)


def database_stores(client: Any) -> list[Any]:
    """The distinct stores of `client` (at `STORE_PATHS`) that keep AID databases in `_aid_dbs`
    and open them with `_get_db`."""
    found: list[Any] = []
    for path in STORE_PATHS:
        holder = client
        for name in path.split("."):
            holder = getattr(holder, name, None)
        if isinstance(getattr(holder, "_aid_dbs", None), dict) and callable(getattr(holder, "_get_db", None)) and not any(
            holder is seen for seen in found
        ):
            found.append(holder)
    return found


def store_database(store: Any, aid: str) -> Any:
    """`store._get_db(aid)`: the store's database object for `aid` (made on first use)."""
    return store._get_db(aid)


def store_databases(store: Any) -> dict[Any, Any]:
    """`store._aid_dbs`: the store's database objects, by key (changed in place to share one)."""
    databases: dict[Any, Any] = store._aid_dbs
    return databases


def database_path(database: Any) -> Any:
    """`database._db_path`: the file a database object opens."""
    return getattr(database, "_db_path", None)


def database_connection(database: Any) -> sqlite3.Connection | None:
    """`database._conn`: its open SQLite connection, if it has one now."""
    connection = getattr(database, "_conn", None)
    return connection if isinstance(connection, sqlite3.Connection) else None


# -- logging and keys ----------------------------------------------------------------------------------


def client_logger(client: Any) -> Any | None:
    """`client._log`: the client's own stderr logger."""
    return getattr(client, "_log", None)


def set_log_floor(logger: Any, level: int) -> bool:
    """Set `logger._min_level`, the lowest level it prints. False if it has none (nothing changed)."""
    if logger is None or not hasattr(logger, "_min_level"):
        return False
    logger._min_level = level
    return True


def key_derivation() -> ModuleType:
    """`aun_core.keystore._utils`: the module whose `derive_master_key` the key store calls."""
    from aun_core.keystore import _utils

    return _utils
