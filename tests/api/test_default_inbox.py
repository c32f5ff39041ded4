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


async def test_the_app_aid_as_a_group_member_and_poster_is_an_inbox_that_hears_the_group() -> None:
    runtime = AUNRuntime()
    await runtime.register_agent("parrot.local", lambda: Replier(times=1))
    await runtime.start()
    try:
        await runtime.create_group("room", ["parrot.local", "app.local"])  # app.local: not registered
        posted = await runtime.group_send("room", "hello room", sender="app.local")
        by_default = await runtime.group_send("room", "and again")  # the sender defaults to app.local
        await runtime.settle()
        inbox = await runtime.open_inbox()
    finally:
        await runtime.close()
    assert posted.from_aid == by_default.from_aid == "app.local"
    assert [m.text for m in inbox.replies_to(posted)] == ["answer 1 of 1 to: hello room"]
    assert [m.text for m in inbox.replies_to(by_default)] == ["answer 1 of 1 to: and again"]
    assert runtime.stats.dead_letters == 0


async def test_the_app_aid_added_to_a_group_later_is_an_inbox_too() -> None:
    async with AUNRuntime() as runtime:
        await runtime.register_agent("parrot.local", lambda: Replier(times=1))
        ana = await runtime.open_inbox("ana.local")
        await runtime.create_group("room", ["parrot.local", "ana.local"])
        await runtime.add_member("room", "app.local")
        await ana.group_send("room", "who is here?")
        await runtime.settle()
        inbox = await runtime.open_inbox()
        assert [m.text for m in inbox.received] == ["who is here?", "answer 1 of 1 to: who is here?"]
        assert runtime.stats.dead_letters == 0


async def test_naming_the_app_aid_as_sender_opens_its_inbox_as_leaving_it_out_does() -> None:
    runtime = AUNRuntime(domain="corp")
    await runtime.register_agent("parrot.corp", lambda: Replier(times=1))
    await runtime.start()
    try:
        sent = await runtime.send("parrot.corp", "hello", sender="app.corp")  # not registered: opened now
        await runtime.settle()
        inbox = await runtime.open_inbox()
    finally:
        await runtime.close()
    assert sent.from_aid == "app.corp"
    assert runtime.is_local("app.corp") and not runtime.is_agent("app.corp")
    assert [m.text for m in inbox.replies_to(sent)] == ["answer 1 of 1 to: hello"]
    assert runtime.stats.dead_letters == 0
