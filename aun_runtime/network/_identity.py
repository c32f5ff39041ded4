"""One exposed AID's AUN identity, held by the real AUN client (`fastaun`, imported lazily).

Keys, certificate, tokens and the device id live in the AID's own client directory
(`data_dir/identities/<aid>`), created by the client's `AIDStore` at the first start and
loaded from there afterwards; login, connection, reconnection and token refresh are the client's.
Only two things are set from the configuration, both through the client's public knobs: the gateway
URL (the per-AID `gateway_url` metadata, read before any discovery) and an extra trusted root
(`root_ca_path`). Its frame decoder gets a guard (`._frame_guard`): a message it could not
parse arrives as unreadable, a dead letter, instead of dropping the connection. Its I/O runs on the
runtime's loop and its delivery cursors commit in batches (`._client_io`).

The client's key store derives its master key from the seed (PBKDF2, 100,000 iterations) every time
it stores or reads a key: five times for each AID's first start, on the event loop, where every
other AID's connection waits. All AIDs of a gateway agent share one seed, so `share_master_key`
has the client derive it once per seed and process (a key the process could derive again at any
time from the seed it holds anyway).
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Callable
from typing import Any

from ._client_internals import client_logger, key_derivation, login_flow, register_flow, set_log_floor
from ._client_io import (
    batch_cursor_writes,
    run_on_loop,
    share_dns_cache,
    share_store_database,
    short_calls_on_loop,
)
from ._config import GatewayAgentConfig
from ._errors import IdentityError, NetworkClientMissingError
from ._frame_guard import guard_client

__all__ = [
    "CLIENT_PACKAGE",
    "open_client",
    "quiet_client",
    "require_client",
    "share_master_key",
]

#: The AUN client this bridge is written against (its wire moves between minors).
CLIENT_PACKAGE = "fastaun==0.5.25"
_LOG_LEVELS = {"debug": 0, "info": 1, "warn": 2, "error": 3}
#: Distinct seeds whose master key is kept (one per gateway agent configuration in the process).
_SHARED_KEYS = 16


def require_client() -> None:
    """Raise [`NetworkClientMissingError`][aun_runtime.network.NetworkClientMissingError] unless the AUN client can be imported."""
    try:
        import aun_core  # noqa: F401
    except ImportError:
        raise NetworkClientMissingError(CLIENT_PACKAGE) from None


async def open_client(
    aid: str, config: GatewayAgentConfig, seed: str, sift: Callable[[dict[str, Any]], None] | None = None
) -> Any:
    """An `AUNClient` for `aid` (not connected), registering the AID on the network if needed;
    `sift` sees each frame from the network before the client does (`._frame_guard.guard_client`).

    Raises:
        IdentityError: registration failed; `retryable` unless the network refused the AID.
    """
    from aun_core import AIDStore, AUNClient
    from aun_core.keystore.local_identity_store import LocalIdentityStore
    from aun_core.logger import NullLogger

    share_master_key()
    path = config.identity_path(aid)
    path.mkdir(parents=True, exist_ok=True)
    if config.gateway_url:
        keys = LocalIdentityStore(str(path), encryption_seed=seed, logger=NullLogger())
        keys.set_metadata_value(aid, "gateway_url", config.gateway_url)
        keys.close()  # its connection to the AID's database would otherwise stay open with it
    store = AIDStore(
        path,
        seed,
        root_ca_path=config.root_ca_path,
        discovery_port=config.discovery_port,
        verify_ssl=config.verify_ssl,
        logger=NullLogger(),
    )
    short_calls_on_loop(register_flow(store))
    share_dns_cache(str(config.data_dir / "dns_cache.db"), store)
    loaded = store.load(aid)
    if not loaded.ok:
        try:
            registered = await store.register(aid, type="agent")
        except Exception as exc:  # the client raises for transport trouble, returns errors otherwise
            raise IdentityError(aid, f"{type(exc).__name__}: {exc}", retryable=True) from exc
        if not registered.ok:
            error = registered.error
            code = str(getattr(error, "code", "") or "")
            reason = f"{code} {getattr(error, 'message', error)}".strip()
            raise IdentityError(aid, reason, retryable="CONFLICT" not in code.upper() and "INVALID" not in code.upper())
        loaded = store.load(aid)
        if not loaded.ok or loaded.data is None:
            raise IdentityError(aid, f"registered, but the identity does not load: {loaded.error}", retryable=False)
    assert loaded.data is not None
    client = quiet_client(AUNClient, loaded.data["aid"], config.client_log_level)
    guard_client(client, aid, sift)  # one unreadable message must not keep it off the network
    # One process holds many of these: no thread per connection, no commit per message received.
    run_on_loop(client)
    short_calls_on_loop(login_flow(client))
    batch_cursor_writes(client)
    share_dns_cache(str(config.data_dir / "dns_cache.db"), client)
    share_store_database(client, aid)
    return client


def share_master_key() -> None:
    """Have the client's key store derive its master key once per seed instead of at every key it
    stores or reads. Idempotent; without the client's `derive_master_key`, nothing changes."""
    utils = key_derivation()
    derive: Callable[[bytes], bytes] | None = getattr(utils, "derive_master_key", None)
    if derive is None or getattr(derive, "shared", False):
        return
    keys: dict[bytes, bytes] = {}
    lock = threading.Lock()  # the client reads keys from its own threads too

    def derive_once(seed_bytes: bytes) -> bytes:
        key = keys.get(seed_bytes)
        if key is None:
            key = derive(seed_bytes)
            with lock:
                if len(keys) >= _SHARED_KEYS:
                    keys.pop(next(iter(keys)))
                keys[seed_bytes] = key
        return key

    derive_once.shared = True  # type: ignore[attr-defined]
    utils.derive_master_key = derive_once  # type: ignore[attr-defined]


def quiet_client(client_class: Any, aid: Any, level: str) -> Any:
    """`client_class(aid)` with its own stderr logger turned down to `level`.

    The client prints INFO and up to stderr, starting in its constructor, unless a global
    `~/.aun/log.ini` says otherwise; a runtime keeps stderr for its own logging.
    """
    quiet = _LOG_LEVELS[level] > _LOG_LEVELS["info"]
    with contextlib.redirect_stderr(io.StringIO()) if quiet else contextlib.nullcontext():
        client = client_class(aid)
    set_log_floor(client_logger(client), _LOG_LEVELS[level])
    return client
