"""How a gateway agent's AUN clients do their I/O: on the runtime's own loop, cursors in batches.

The AUN client (`fastaun` 0.5.25) is written for one identity per process. Held a thousand times
in one process, two of its habits cost more than the messages it carries:

* Each connection gets a *network actor* of its own: a thread with an event loop (its epoll and
  self-pipe descriptors, its stack) that holds the WebSocket, and every call, answer and event hops
  between that thread and the caller's loop. `run_on_loop` gives a client's transport an
  actor that runs the same coroutines on the loop that calls it, the runtime's: no thread, no hop,
  the same code path (the actor is the client's own seam: `submit` a coroutine, `stop`).
  Its one-off calls on a WebSocket of their own (registration, the two login phases, token
  refresh) start a fresh thread each; `short_calls_on_loop` runs them on the loop too.
* Each client (and each of its identity stores) keeps a DNS cache, a fallback address per host
  name, in a SQLite file of its own directory, open all the time: two connections and five
  descriptors per AID for the same few host names. `share_dns_cache` points them all at one
  file of the gateway agent's data directory.
* Its identity and token stores (three of them, the client's and its AID store's) each open the
  AID's `aun.db` with a connection of their own: about 200 KB of memory and three descriptors
  each, for one file. `share_store_database` has them all use one (the client's
  `AIDDatabase` serialises its users with a lock of its own and begins and commits each
  transaction within one call, so one connection serves them as it serves the client's threads).
  That connection keeps a page cache of up to 2 MB that its start-up reads fill; a connected AID
  reads it seldom. `trim_stores` holds it to `STORE_CACHE_KB` and gives back what it
  cached.
* Its delivery cursor (which sequence number of each sender it has seen) is committed to its
  SQLite file once per message received, on the event loop. `batch_cursor_writes` makes
  those writes coalesce: the newest cursor of each namespace is kept in memory and committed
  `CURSOR_DELAY` seconds later, once for all that arrived meanwhile, and always before the
  client reads its cursors back and when the link stops. A cursor lost to a crash is older than
  the truth, never newer: the client pulls again from it, and the messages that come a second time
  were acknowledged only after the archive committed them, so the receiving channel drops them as
  duplicates. Nothing is skipped.

All are written against the pinned client (`CLIENT_PACKAGE`), whose private members they reach
only through `._client_internals`, and change nothing if its parts are not where they are
expected (they return False), so a different client runs as it comes.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any

from ._client_internals import (
    database_connection,
    database_path,
    database_stores,
    dns_cache_of,
    network_actor,
    replace_short_calls,
    replace_transport_io,
    set_network_actor,
    share_dns_connection,
    short_call_io,
    store_database,
    store_databases,
    token_store,
    transport_io,
    transport_of,
)

__all__ = [
    "CURSOR_DELAY", "ON_WIRE", "STORE_CACHE_KB", "CursorBatch", "LoopActor", "batch_cursor_writes", "flush_cursors", "run_on_loop",
    "share_dns_cache", "share_store_database", "short_calls_on_loop", "trim_stores",
]

log = logging.getLogger("aun_runtime.gateway")

#: Seconds a delivery cursor waits in memory for more to ride on its commit.
CURSOR_DELAY = 0.2
#: Told each frame a client's transport has written to its WebSocket, in the task that called the
#: client (the transport's work runs in a copy of its context). A lane uses it to start the next
#: message once the one before it is on the wire, so that frames leave in the lane's order.
ON_WIRE: ContextVar[Callable[[str], None] | None] = ContextVar("aun_runtime_on_wire", default=None)
#: The token store's reads of cursors; each commits what waits first, so the client reads its own writes.
_CURSOR_READS = ("load_all_sync_states", "load_all_seqs", "load_seq")


class LoopActor:
    """The client's network actor, without its thread: coroutines run as tasks of `loop`.

    The transport awaits what `submit` returns through `asyncio.wrap_future`, which hands an
    asyncio future back as is, and cancels it to abandon a call: a task does both.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = self._loop.create_task(coroutine)
        task.add_done_callback(_retrieve)  # like the thread's futures: an unread failure stays quiet
        return task

    def stop(self, timeout: float | None = None) -> None:
        """Nothing to stop: the loop is the runtime's."""


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def run_on_loop(client: Any) -> bool:
    """Have `client`'s transport keep its WebSocket on the running loop instead of a thread of
    its own. False if the client is not the one this is written for (then nothing is changed)."""
    transport = transport_of(client)
    write = transport_io(transport)
    if write is None:
        return False
    loop = asyncio.get_running_loop()

    def ensure_actor() -> LoopActor:
        actor = network_actor(transport)
        if not isinstance(actor, LoopActor):
            actor = LoopActor(loop)
            set_network_actor(transport, actor)
        return actor

    async def write_and_tell(payload: str) -> None:
        await write(payload)
        tell = ON_WIRE.get()
        if tell is not None:
            tell(payload)

    replace_transport_io(transport, ensure_actor, write_and_tell)
    return True


def short_calls_on_loop(flow: Any) -> bool:
    """Have `flow` (the client's login or registration flow) make its one-off calls on the
    running loop instead of a thread started for each. False if it is not the one this is written
    for (then nothing is changed)."""
    direct = short_call_io(flow)
    if direct is None:
        return False
    replace_short_calls(flow, direct)  # the same call, minus the thread around it
    return True


#: The page cache each of a client's ``aun.db`` connections may keep, in KB (SQLite's default: 2,000).
STORE_CACHE_KB = 64
#: Open shared DNS caches, by file: one per gateway agent data directory in the process.
_DNS_CACHES: dict[str, tuple[sqlite3.Connection, threading.Lock]] = {}
_DNS_CACHES_LOCK = threading.Lock()
_DNS_CACHE_TABLE = ("CREATE TABLE IF NOT EXISTS dns_cache (hostname TEXT PRIMARY KEY, ip TEXT NOT NULL, "
                    "port INTEGER NOT NULL, updated_at INTEGER NOT NULL)")


def share_dns_cache(path: str, *holders: Any) -> int:
    """Point the DNS cache of each of `holders` (a client, its `AIDStore`: whatever holds the
    client's network helper) at the one in `path`, closing its own. Returns how many
    were moved; one that is not the client's helper as expected is left as it is."""
    with _DNS_CACHES_LOCK:
        shared = _DNS_CACHES.get(path)
        if shared is None:
            # Used under the shared lock, from the loop and the client's resolver threads alike.
            connection = sqlite3.connect(path, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_DNS_CACHE_TABLE)
            connection.commit()
            shared = _DNS_CACHES[path] = (connection, threading.Lock())
    moved = 0
    for holder in holders:
        found = dns_cache_of(holder)
        if found is None:
            continue
        net, own = found
        if own is not shared[0]:
            own.close()
        share_dns_connection(net, *shared)
        net.close = _keep_open  # closing one client must not close the others' cache
        moved += 1
    return moved


def share_store_database(client: Any, aid: str) -> int:
    """Have every store of `client` use one database object (one connection) for `aid`'s
    `aun.db`: the client's token store's, which its end-to-end encryption session uses too.
    Call it before the client connects, once nothing else of the process holds the file open.
    Returns how many others were replaced (and closed); none if the stores are not where the pinned
    client keeps them."""
    stores = database_stores(client)
    if not stores:
        return 0
    shared = store_database(stores[0], aid)
    path = database_path(shared)
    replaced = 0
    for store in stores[1:]:
        own = store_database(store, aid)  # made on first use otherwise: the store's entry is what it will use
        if own is shared or database_path(own) != path:
            continue
        databases = store_databases(store)
        for key, database in list(databases.items()):
            if database is own:
                databases[key] = shared
        own.close()
        replaced += 1
    # SQLite keeps a closed connection's descriptor for as long as another connection of the
    # process holds the file (POSIX locks belong to the process). Closing the shared one as well
    # lets every descriptor go; it opens again, once, on its next use.
    shared.close()
    return replaced


def trim_stores(client: Any) -> int:
    """Hold the page cache of each SQLite connection `client`'s stores have open to
    `STORE_CACHE_KB` and release what they cached (on the loop, between their
    transactions). Returns how many connections were trimmed."""
    trimmed = 0
    seen: set[int] = set()
    for store in database_stores(client):
        for database in list(store_databases(store).values()):
            connection = database_connection(database)
            if connection is None or id(connection) in seen:
                continue
            seen.add(id(connection))
            try:
                connection.execute(f"PRAGMA cache_size = -{STORE_CACHE_KB}")
                connection.execute("PRAGMA shrink_memory")
            except sqlite3.Error as exc:  # only memory is at stake
                log.debug("cannot trim an AUN client store: %s", exc)
                continue
            trimmed += 1
    return trimmed


def _keep_open() -> None:
    """A shared DNS cache stays open for the process."""


class CursorBatch:
    """The delivery cursors of one client's token store that wait to be committed.

    Args:
        save: the store's own `save_sync_states(aid, device_id, slot_id, states)`.
        delay: seconds a cursor waits for others to share its commit.
    """

    def __init__(self, save: Callable[[str, str, str, dict[str, dict[str, int]]], None], delay: float = CURSOR_DELAY) -> None:
        self._save = save
        self._delay = delay
        # Bounded by the namespaces of one client (one per peer and group it hears from), newest only.
        self._pending: dict[tuple[str, str, str], dict[str, dict[str, int]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.commits = 0

    def put(self, aid: str, device_id: str, slot_id: str, states: dict[str, dict[str, int]]) -> None:
        """Keep `states` until the next commit (each mark only moves forward, as the store does)."""
        waiting = self._pending.setdefault((aid, device_id, slot_id), {})
        for namespace, state in states.items():
            before = waiting.get(namespace)
            waiting[namespace] = dict(state) if before is None else {
                key: max(int(before.get(key, 0)), int(value)) for key, value in state.items()
            }
        if self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(self._delay, self.flush)
            except RuntimeError:  # no loop (the client closing from a thread): commit now
                self.flush()

    def flush(self) -> None:
        """Commit what waits, one store commit per identity."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, {}
        for (aid, device_id, slot_id), states in pending.items():
            try:
                self._save(aid, device_id, slot_id, states)
            except Exception as exc:  # the next cursor commits again; an older one on disk loses nothing
                log.warning("%s: the AUN client's delivery cursor could not be committed: %s", aid, exc)
            else:
                self.commits += 1


def batch_cursor_writes(client: Any, delay: float = CURSOR_DELAY) -> CursorBatch | None:
    """Make `client`'s delivery-cursor commits coalesce (see the module). None if its token store
    is not the one this is written for (then nothing is changed)."""
    store = token_store(client)
    save = getattr(type(store), "save_sync_states", None)
    if store is None or save is None or any(getattr(type(store), name, None) is None for name in _CURSOR_READS):
        return None
    if isinstance(getattr(store, "_aun_runtime_cursor_batch", None), CursorBatch):
        return store._aun_runtime_cursor_batch  # type: ignore[no-any-return]
    batch = CursorBatch(save.__get__(store), delay)

    def reading(name: str) -> Callable[..., Any]:
        read = getattr(type(store), name).__get__(store)

        def read_own_writes(*args: Any, **kwargs: Any) -> Any:
            batch.flush()
            return read(*args, **kwargs)

        return read_own_writes

    for name in _CURSOR_READS:
        setattr(store, name, reading(name))
    store.save_sync_states = batch.put
    store._aun_runtime_cursor_batch = batch
    return batch


def flush_cursors(client: Any) -> None:
    """Commit `client`'s waiting delivery cursors now (before it closes, or the process ends)."""
    batch = getattr(token_store(client), "_aun_runtime_cursor_batch", None)
    if isinstance(batch, CursorBatch):
        batch.flush()
