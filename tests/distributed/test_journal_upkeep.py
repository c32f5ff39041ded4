"""The journal's upkeep beside the loop: its write-ahead log checkpointed on a thread of its own,
and acknowledged outbox rows deleted without waiting for the next message."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

from aun_runtime import RecordKind
from aun_runtime.delivery._directory import AIDStatus
from aun_runtime.distributed._checkpoint import CHECKPOINT_EVERY, SAFETY_PAGES
from aun_runtime.distributed._journal import JournalArchive
from aun_runtime.distributed._outbox import Outbox

from .processes import wait_until


def _wal_frames(path: Path) -> int:
    """Frames in the file's write-ahead log now (a passive checkpoint from another connection tells)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        _, log, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(log)
    finally:
        db.close()


def test_the_log_is_checkpointed_beside_the_loop_and_stays_small(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    journal = JournalArchive(path)
    try:
        # A commit itself would checkpoint only past SAFETY_PAGES; the checkpointer's thread does it
        # every CHECKPOINT_EVERY commits instead.
        assert journal._writer.read(lambda db: db.fetch("PRAGMA wal_autocheckpoint")[0][0]) == SAFETY_PAGES
        checkpointer = journal._checkpointer
        assert checkpointer is not None
        for round in range(1, 21):
            for n in range(CHECKPOINT_EVERY):
                journal.record_event("a.local", RecordKind.DEAD_LETTER, "x" * 2000, None)
                journal.outbox_add("b.local", round * CHECKPOINT_EVERY + n, b"y" * 2000)
                journal.flush()
            wait_until(lambda: checkpointer.checkpoints >= round, what=f"checkpoint {round}")  # noqa: B023
        # Each commit adds a few pages; without checkpoints the log would hold them all (thousands).
        assert _wal_frames(path) < 10 * CHECKPOINT_EVERY
    finally:
        journal.close()
    assert not checkpointer.running  # closing stops it


def test_an_in_memory_journal_has_no_checkpointer() -> None:
    journal = JournalArchive(":memory:")
    assert journal._checkpointer is None
    journal.close()


async def test_acknowledged_rows_are_deleted_by_a_commit_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    journal = JournalArchive(path)
    sent: list[agent_worker_pb2.Message] = []

    def send(message: agent_worker_pb2.Message) -> bool:
        sent.append(message)
        return True

    outbox = Outbox(journal, send, lambda aid: AIDStatus.HELD)
    outbox.connected = True
    for n in range(3):
        outbox.append("b.local", cloudevent_pb2.CloudEvent(id=str(n), type="aun.inbox.b.local"))
    journal.flush()  # the rows are durable: on_commit would send them; here the test does
    outbox.committed([("b.local", 3)])
    assert len(sent) == 3 and _count(path, "SELECT COUNT(*) FROM aun_outbox") == 3
    commits = asyncio.Event()
    journal.on_commit = lambda commit: commits.set()
    outbox.acknowledged("b.local", 3)
    # Nothing else happens on this worker: the deletion must come by itself.
    await asyncio.wait_for(commits.wait(), 5)
    assert _count(path, "SELECT COUNT(*) FROM aun_outbox") == 0
    journal.close()


def _count(path: Path, sql: str) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute(sql).fetchone()[0])
    finally:
        db.close()
