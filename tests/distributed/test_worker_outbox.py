"""A worker's outbox, on both stores: what was sent and not acknowledged is taken up again by the
next run of the worker, in order, and what was acknowledged is not."""

from __future__ import annotations

from autogen_ext.runtimes.grpc.protos import cloudevent_pb2

from aun_runtime.distributed import _outbox as outbox_module
from aun_runtime.distributed._journal import JournalArchive
from aun_runtime.distributed._outbox import Outbox
from tests.conftest import Stores


def _outbox(journal: JournalArchive) -> Outbox:
    # Every AID held (the status type is the one the outbox compares with).
    return Outbox(journal, lambda message: True, lambda aid: outbox_module.AIDStatus.HELD)


def _event(text: str) -> cloudevent_pb2.CloudEvent:
    return cloudevent_pb2.CloudEvent(id=text, source="test", type="text", text_data=text)


async def test_the_unacknowledged_rest_of_a_stream_is_taken_up_by_the_next_run(store: Stores) -> None:
    location = store("w")
    journal = JournalArchive(location, worker="w")
    outbox = _outbox(journal)
    seqs = [outbox.append("sink.local", _event(f"m{n}")) for n in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    journal.flush()  # the rows are committed with the next commit
    outbox.acknowledged("sink.local", 2)  # the receiver handled 1 and 2
    journal.flush()
    journal.close()

    again = JournalArchive(location, worker="w")
    taken_up = _outbox(again)
    taken_up.load()
    assert taken_up.size == 3
    assert [(aid, seq) for aid, seq, _ in again.load_outbox()] == [("sink.local", 3), ("sink.local", 4), ("sink.local", 5)]
    assert taken_up.append("sink.local", _event("m5")) == 6  # the stream's numbering goes on
    again.close()
