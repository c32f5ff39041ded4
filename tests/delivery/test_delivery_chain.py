"""The delivery chain's pieces that the hot path leans on: the dedup ring and a post's copies in one call."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import ClassVar

from autogen_core import AgentId, MessageContext, RoutedAgent, TopicId, TypeSubscription, event

from aun_runtime import Archive, AUNActorRuntime
from aun_runtime.delivery._channel import Admission, Channel
from protocols.aun import AUNMessage, TextPayload


def _message(message_id: str) -> AUNMessage:
    return AUNMessage(message_id=message_id, from_aid="a.local", to="b.local", payload=TextPayload(text="hi"))


def test_the_dedup_ring_forgets_its_oldest_key_at_its_bound() -> None:
    archive = Archive(":memory:")
    channel = Channel("b.local", archive, dedup_window=3, seed=[])
    for message_id in ("m1", "m2", "m3", "m4"):
        assert channel.admit(_message(message_id)) is Admission.DELIVER
    assert channel.keys() == (("a.local", "m2"), ("a.local", "m3"), ("a.local", "m4"))
    assert channel.admit(_message("m4")) is Admission.DUPLICATE  # still remembered
    assert channel.admit(_message("m1")) is Admission.DELIVER  # the oldest was forgotten...
    assert channel.admit(_message("m2")) is Admission.DELIVER  # ...and m1 coming back pushed out m2
    assert channel.keys() == (("a.local", "m4"), ("a.local", "m1"), ("a.local", "m2"))
    archive.close()


def test_a_seed_with_a_key_twice_keeps_it_once() -> None:
    archive = Archive(":memory:")
    channel = Channel("b.local", archive, dedup_window=2, seed=[("a.local", "m1"), ("a.local", "m1")])
    assert channel.keys() == (("a.local", "m1"),)
    assert channel.admit(_message("m2")) is Admission.DELIVER
    # Were the seed's second copy still in the ring, evicting the first would have forgotten m1 here.
    assert channel.admit(_message("m1")) is Admission.DUPLICATE
    archive.close()


@dataclass
class Note:
    n: int


class Recorder(RoutedAgent):
    log: ClassVar[list[tuple[str, int, str]]] = []

    def __init__(self) -> None:
        super().__init__("records")

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        assert ctx.topic_id is not None
        self.log.append((self.id.type, message.n, ctx.topic_id.type))


async def test_publish_copies_gives_each_copy_its_topic_in_order_and_waits_for_room() -> None:
    Recorder.log = []
    runtime = AUNActorRuntime(mailbox_capacity=1)
    for name in ("x", "y", "z"):
        await Recorder.register(runtime, name, Recorder)
        await runtime.add_subscription(TypeSubscription(f"inbox.{name}", name))
    topics = [TopicId(f"inbox.{name}", "default") for name in ("x", "y", "z")]
    # Not started: the first copy fills x's mailbox (capacity 1), so the second post's copy to x waits
    # for room, and its copies to y and z, behind it, are not routed before it.
    await runtime.publish_copies(Note(1), topics, message_id="p1")
    second = asyncio.ensure_future(runtime.publish_copies(Note(2), topics, message_id="p2"))
    await asyncio.sleep(0.05)
    assert not second.done()
    assert [runtime.mailbox(AgentId(name, "default")).occupancy for name in ("x", "y", "z")] == [1, 1, 1]  # type: ignore[union-attr]
    runtime.start()
    await second
    await runtime.stop_when_idle()
    assert sorted(Recorder.log) == sorted(
        [(name, n, f"inbox.{name}") for n in (1, 2) for name in ("x", "y", "z")]
    )
    for name in ("x", "y", "z"):
        assert [n for agent, n, _ in Recorder.log if agent == name] == [1, 2]
