"""``runtime.send`` without a sender speaks from an inbox that exists, so the answers are heard; and
a reply that became a dead letter is shown among the replies of what it answers."""

from __future__ import annotations

from aun_runtime import AUNRuntime, RecordKind
from aun_runtime.testing import Replier


async def test_a_send_without_sender_hears_the_answers_in_the_app_inbox() -> None:
    runtime = AUNRuntime()
    await runtime.register_agent("parrot.local", lambda: Replier(times=2))
    await runtime.start()
    try:
        sent = await runtime.send("parrot.local", "hello")
        await runtime.settle()
        inbox = await runtime.open_inbox()  # the one the send opened
        transcript = runtime.transcript()
    finally:
        await runtime.close()
    assert sent.from_aid == "app.local"
    assert [m.text for m in inbox.replies_to(sent)] == ["answer 1 of 2 to: hello", "answer 2 of 2 to: hello"]
    assert runtime.stats.dead_letters == 0
    assert "delivered to parrot.local · 2 replies" in transcript
    assert "DEAD LETTER" not in transcript


async def test_replies_that_became_dead_letters_are_counted_and_shown_under_what_they_answer() -> None:
    runtime = AUNRuntime()
    await runtime.register_agent("parrot.local", lambda: Replier(times=2))
    await runtime.start()
    try:
        await runtime.send("parrot.local", "hello", sender="ghost.local")  # nobody is ghost.local
        await runtime.settle()
        transcript = runtime.transcript()
        dead = runtime.archive.records(kinds=[RecordKind.DEAD_LETTER])
    finally:
        await runtime.close()
    # The first reply has no recipient: a dead letter, and the handler stops there (a second one).
    assert runtime.stats.dead_letters == 2 == len(dead)
    lines = transcript.splitlines()
    assert lines[1].strip() == "delivered to parrot.local · 1 reply"
    assert lines[2].strip().startswith("!! DEAD LETTER at parrot.local")
    assert lines[3] == "    #2 parrot.local -> ghost.local [dead letter; re #1]: 'answer 1 of 2 to: hello'"
    assert lines[5].strip() == "!! DEAD LETTER at parrot.local: UnknownAIDError: no agent ghost.local is " \
        "registered in this runtime"
    assert transcript.count("!! DEAD LETTER") == runtime.stats.dead_letters
