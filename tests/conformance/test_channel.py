"""The channel: dispatch mode decides what an agent sees; everything is archived exactly once."""

from __future__ import annotations

from aun_runtime import AUNMessage, DispatchMode, RecordKind, TextPayload
from aun_runtime.testing import Gate, Recorder, Silent

from .conftest import RuntimeFactory

MEMBERS = ["ann.local", "bob.local", "cat.local"]


async def _team(make_runtime: RuntimeFactory, mode: str) -> tuple:  # type: ignore[type-arg]
    runtime = await make_runtime()
    for aid in MEMBERS:
        await runtime.register_agent(aid, Recorder)
    await runtime.create_group("team", MEMBERS, mode)
    await runtime.start()
    return runtime, [await runtime.agent_instance(aid, Recorder) for aid in MEMBERS]


async def test_broadcast_shows_every_group_message_to_every_other_member(
    make_runtime: RuntimeFactory,
) -> None:
    runtime, (ann, bob, cat) = await _team(make_runtime, "broadcast")

    await runtime.group_send("team", "morning all", sender="ann.local")
    await runtime.group_send("team", "bob, a word?", sender="cat.local", mentions=["bob.local"])
    await runtime.settle()

    assert [m.text for m in ann.received] == ["bob, a word?"]
    assert [m.text for m in bob.received] == ["morning all", "bob, a word?"]
    assert [m.text for m in cat.received] == ["morning all"]
    assert runtime.stats.filtered == 0


async def test_mention_mode_shows_only_what_names_you_and_archives_the_rest(
    make_runtime: RuntimeFactory,
) -> None:
    runtime, (ann, bob, cat) = await _team(make_runtime, "mention")

    sent = [
        await runtime.group_send("team", "general chatter", sender="ann.local"),
        await runtime.group_send("team", "@cat.local in text does not count", sender="ann.local"),
        await runtime.group_send("team", "bob, please look", sender="ann.local", mentions=["bob.local"]),
        await runtime.group_send("team", "everyone: standup", sender="bob.local", mentions=["all"]),
    ]
    await runtime.settle()

    assert [m.text for m in bob.received] == ["bob, please look"]
    assert [m.text for m in cat.received] == ["everyone: standup"]
    assert [m.text for m in ann.received] == ["everyone: standup"]
    filtered = runtime.archive.history("cat.local", kinds=[RecordKind.FILTERED])
    assert [r.text for r in filtered] == [sent[0].text, sent[1].text, sent[2].text]
    assert all(r.reason == "mention mode: not mentioned" for r in filtered)


async def test_archive_is_complete_delivered_plus_filtered_plus_own_equals_total(
    make_runtime: RuntimeFactory,
) -> None:
    runtime, _ = await _team(make_runtime, "mention")
    posts = [
        ("ann.local", "one", None),
        ("bob.local", "two", ["ann.local"]),
        ("cat.local", "three", ["all"]),
        ("ann.local", "four", ["cat.local"]),
        ("bob.local", "five", None),
    ]
    for sender, text, mentions in posts:
        await runtime.group_send("team", text, sender=sender, mentions=mentions)
    await runtime.settle()

    for aid in MEMBERS:
        records = runtime.archive.history(aid, group_id="team")
        kinds = [r.kind for r in records]
        delivered = kinds.count(RecordKind.RECEIVED)
        filtered = kinds.count(RecordKind.FILTERED)
        own = kinds.count(RecordKind.SENT)
        assert delivered + filtered + own == len(posts), aid
        message_ids = [r.message.message_id for r in records if r.message]
        assert len(set(message_ids)) == len(posts), f"{aid}: each message archived exactly once"


async def test_a_mode_change_is_never_retroactive(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("ann.local", Silent)
    await runtime.register_agent("gate.local", Gate)
    await runtime.create_group("room", ["ann.local", "gate.local"], "broadcast")
    await runtime.start()
    gate = await runtime.agent_instance("gate.local", Gate)

    first = await runtime.group_send("room", "sent while broadcast", sender="ann.local")
    await runtime.set_dispatch_mode("room", "mention-only")  # before the receiver got to it
    second = await runtime.group_send("room", "sent while mention", sender="ann.local")
    gate.opened.set()
    await runtime.settle()

    assert first.dispatch_mode is DispatchMode.BROADCAST and second.dispatch_mode is DispatchMode.MENTION
    assert [m.text for m in gate.received] == ["sent while broadcast"]
    assert runtime.group("room").dispatch_mode is DispatchMode.MENTION


async def test_a_second_delivery_of_the_same_message_is_handled_once(make_runtime: RuntimeFactory) -> None:
    runtime = await make_runtime()
    await runtime.register_agent("rec.local", Recorder)
    await runtime.open_inbox()
    await runtime.start()

    for _ in range(3):
        await runtime.send("rec.local", "only once", message_id="retry-1")
    await runtime.send("rec.local", "same id, other sender", message_id="retry-1", sender="other.local")
    await runtime.settle()

    recorder = await runtime.agent_instance("rec.local", Recorder)
    assert [m.text for m in recorder.received] == ["only once", "same id, other sender"]
    assert runtime.stats.duplicates == 2
    assert runtime.archive.count(owner="rec.local", kind=RecordKind.RECEIVED) == 2


async def test_membership_changes_at_run_time(make_runtime: RuntimeFactory) -> None:
    runtime, (_ann, bob, cat) = await _team(make_runtime, "broadcast")

    await runtime.remove_member("team", "cat.local")
    await runtime.group_send("team", "cat has left", sender="ann.local")
    await runtime.add_member("team", "cat.local")
    await runtime.group_send("team", "cat is back", sender="ann.local")
    await runtime.settle()

    assert [m.text for m in cat.received] == ["cat is back"]
    assert [m.text for m in bob.received] == ["cat has left", "cat is back"]


async def test_history_lets_an_agent_fold_what_it_was_not_shown_into_its_next_turn(
    make_runtime: RuntimeFactory,
) -> None:
    runtime, (_ann, bob, _cat) = await _team(make_runtime, "mention")
    await runtime.group_send("team", "the build is red", sender="ann.local")
    await runtime.group_send("team", "since the merge", sender="cat.local")
    await runtime.group_send("team", "bob, can you look?", sender="ann.local", mentions=["bob.local"])
    await runtime.settle()

    context = bob.history(group_id="team")
    assert [(r.kind, r.text) for r in context] == [
        (RecordKind.FILTERED, "the build is red"),
        (RecordKind.FILTERED, "since the merge"),
        (RecordKind.RECEIVED, "bob, can you look?"),
    ]
    assert isinstance(context[-1].message, AUNMessage)
    assert isinstance(context[-1].message.payload, TextPayload)
