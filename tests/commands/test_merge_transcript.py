"""Merged archives: a message received in one archive before (by the clocks) it is recorded sent in
another is still one message, from inside, with its delivery."""

from __future__ import annotations

from aun_runtime import RecordKind
from aun_runtime.storage._archive import ArchiveRecord
from aun_runtime.transcripts._transcript import render_transcript
from protocols.aun import AUNMessage


def _record(n: int, owner: str, kind: RecordKind, message: AUNMessage, at: int) -> ArchiveRecord:
    return ArchiveRecord(n, owner, kind, None, message, None, at)


def test_a_message_received_first_and_sent_later_is_shown_once_from_inside() -> None:
    hello = AUNMessage(from_aid="alice.local", to="bob.local", payload={"type": "text", "text": "hi"})
    answer = AUNMessage(
        from_aid="bob.local", to="alice.local", payload={"type": "text", "text": "hello"},
        in_reply_to=hello.message_id,
    )
    records = [
        _record(1, "bob.local", RecordKind.RECEIVED, hello, 10),  # bob's archive, its clock a bit behind
        _record(1, "alice.local", RecordKind.SENT, hello, 11),  # alice's archive
        _record(2, "bob.local", RecordKind.SENT, answer, 12),
        _record(2, "alice.local", RecordKind.RECEIVED, answer, 13),
    ]
    transcript = render_transcript(records)
    assert "from outside" not in transcript
    assert transcript.count("alice.local -> bob.local") == 1
    assert transcript.splitlines() == [
        "#1 alice.local -> bob.local [proactive]: 'hi'",
        "    delivered to bob.local · 1 reply",
        "    #2 bob.local -> alice.local [re #1]: 'hello'",
        "        delivered to alice.local · no reply",
    ]
