"""The AUN client's delivery cursors, committed in batches: on the client's real token store, in a
real SQLite file, read back by a store that knows nothing of the batching. And an exposed AID's
stores sharing one connection to its database."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

from aun_core.keystore.local_token_store import LocalTokenStore

from aun_runtime import AUNRuntime, Inbox
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent
from aun_runtime.network._client_io import CURSOR_DELAY, batch_cursor_writes, flush_cursors

from .conftest import PlainClient, eventually, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]

AID = "cursor.aun.localhost"
NS = "p2p.peer.v1/sender.aun.localhost"


def _on_disk(root: Path) -> dict[str, dict[str, int]]:
    fresh = LocalTokenStore(root)  # another store on the same file: what a restart would read
    try:
        return fresh.load_all_sync_states(AID, "device", "slot")
    finally:
        fresh.close()


async def test_cursors_of_a_burst_are_one_commit_with_the_newest_marks(tmp_path: Path) -> None:
    store = LocalTokenStore(tmp_path)
    batch = batch_cursor_writes(SimpleNamespace(_token_store=store))
    assert batch is not None
    for seq in (1, 2, 3, 2):  # a late, older mark never moves a cursor back
        store.save_sync_states(AID, "device", "slot", {NS: {"ack": seq, "tail": seq, "head": seq}})
    assert _on_disk(tmp_path) == {}  # nothing committed yet: the burst waits to share one commit
    await asyncio.sleep(CURSOR_DELAY * 3)
    assert batch.commits == 1
    assert _on_disk(tmp_path) == {NS: {"ack": 3, "tail": 3, "head": 3}}
    store.close()


async def test_the_client_reads_its_own_waiting_cursors_and_closing_commits_them(tmp_path: Path) -> None:
    store = LocalTokenStore(tmp_path)
    client = SimpleNamespace(_token_store=store)
    batch = batch_cursor_writes(client)
    assert batch is not None and batch_cursor_writes(client) is batch  # once per store
    store.save_sync_states(AID, "device", "slot", {NS: {"ack": 7, "tail": 7, "head": 7}})
    assert store.load_all_sync_states(AID, "device", "slot") == {NS: {"ack": 7, "tail": 7, "head": 7}}
    assert store.load_seq(AID, "device", "slot", NS) == 7
    store.save_sync_states(AID, "device", "slot", {NS: {"ack": 9, "tail": 9, "head": 9}})
    flush_cursors(client)  # what the link does once the client is closed
    assert _on_disk(tmp_path) == {NS: {"ack": 9, "tail": 9, "head": 9}}
    assert batch.commits == 2
    store.close()


def test_a_store_that_is_not_the_clients_is_left_alone() -> None:
    other = SimpleNamespace(save_sync_states=lambda *args: None)
    assert batch_cursor_writes(SimpleNamespace(_token_store=other)) is None
    assert batch_cursor_writes(SimpleNamespace()) is None


async def test_an_exposed_aids_stores_share_one_connection_to_its_database(
    tmp_path: Path, gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    aid = f"onedb.{gateway.issuer}"
    inboxes: list[Inbox] = []

    async def register(runtime: AUNRuntime) -> None:
        inboxes.append(await runtime.open_inbox(aid))

    await bridged(info_of(gateway), "onedb", register)
    user = await plain_clients(info_of(gateway), "user")
    await user.send(aid, {"type": "text", "text": "through every store"})  # keys, cursor, session: all used
    await eventually(lambda: len(inboxes[0].received) == 1, what="the message")
    [database] = (tmp_path / "onedb" / "identities" / aid).rglob("aun.db")
    opened = [fd for fd in os.listdir("/proc/self/fd") if _target(fd) == str(database)]
    assert len(opened) == 1  # the client's three stores open it once between them


def _target(fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # closed meanwhile
        return None
