"""The AUN client's delivery cursors, committed in batches: on the client's real token store, in a
real SQLite file, read back by a store that knows nothing of the batching."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from aun_core.keystore.local_token_store import LocalTokenStore

from aun_runtime.network._client_io import CURSOR_DELAY, batch_cursor_writes, flush_cursors

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
