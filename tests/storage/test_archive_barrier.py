"""A wait for the archive's commit that is given up (its task cancelled) leaves the writer writing."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from aun_runtime import Archive, AUNMessage, RecordKind

#: Records queued ahead of the commit wait, so that the writer is still busy when it is cancelled.
BACKLOG = 20_000


async def test_a_cancelled_commit_wait_does_not_stop_the_writer(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "archive.sqlite")
    message = AUNMessage(from_aid="a.local", to="b.local", payload={"type": "text", "text": "hi"})
    for _ in range(BACKLOG):
        archive.record("a.local", RecordKind.SENT, message)
    waiting = asyncio.create_task(archive.committed())
    await asyncio.sleep(0)  # its barrier is queued behind the backlog
    waiting.cancel()
    # The writer settles the barrier of a wait nobody makes any more, and goes on: a flush returns.
    flushed = threading.Event()
    threading.Thread(target=lambda: (archive.flush(), flushed.set()), daemon=True).start()
    assert await asyncio.to_thread(flushed.wait, 30), "the archive writer stopped: flush never returned"
    archive.record("a.local", RecordKind.SENT, message)
    archive.flush()
    assert archive.count() == BACKLOG + 1
    archive.close()
