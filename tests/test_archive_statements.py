"""The archive writes batches of any size with a handful of prepared statements."""

from __future__ import annotations

from aun_runtime import Archive, AUNMessage, RecordKind
from protocols.aun import TextPayload


def test_batches_of_every_size_reuse_a_few_statement_sizes() -> None:
    archive = Archive(":memory:", batch_size=512)
    message = AUNMessage(from_aid="a.local", to="b.local", payload=TextPayload(text="hi"))
    written = 0
    for size in range(1, 300, 7):  # what the flush timer hands over: batches of every size
        for _ in range(size):
            archive.record("b.local", RecordKind.RECEIVED, message)
        archive.flush()
        written += size
    assert archive.count(owner="b.local") == written
    for inserter in (archive._message_inserter, archive._record_inserter):
        sizes = inserter.statement_sizes
        assert len(sizes) <= 12  # powers of two up to a full statement, never one per batch size
        assert all(size & (size - 1) == 0 for size in sizes)
    archive.close()
