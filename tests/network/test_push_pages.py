"""Direct messages that come faster than they are handled reach the runtime in pages: the pushes that
come while an earlier one is on its way are hints, and the real AUN client pulls what they announce
in one page, one acknowledgement for all; in order, once each, acknowledged after the archive."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aun_runtime import AUNRuntime
from aun_runtime.gateway import GatewayServer
from aun_runtime.network import GatewayAgent
from aun_runtime.network import _push_pages as push_pages
from aun_runtime.network._push_pages import PUSH_METHOD, PushPages

from .conftest import Gate, PlainClient, agent_named, committed, eventually, inbox_named, info_of

Bridged = Callable[..., Awaitable[tuple[AUNRuntime, GatewayAgent]]]
Clients = Callable[..., Awaitable[PlainClient]]


def push(sender: str, seq: int, **extra: Any) -> dict[str, Any]:
    """An `event/message.received` push as the gateway sends it, the message inline."""
    message = {"message_id": f"m{seq}", "from_aid": sender, "seq": seq, "payload": {"type": "text", "text": str(seq)}}
    params = {"from_aid": sender, "sender_aid": sender, "seq": seq, "prev_peer_seq": seq - 1, "inline_message": message}
    return {"jsonrpc": "2.0", "method": PUSH_METHOD, "params": {**params, **extra}}


def inline(frame: dict[str, Any]) -> bool:
    return "inline_message" in frame["params"]


def test_a_push_that_comes_while_the_one_before_is_on_its_way_is_a_hint() -> None:
    pages = PushPages()
    pages.handed_over("a.test", 0)  # a sender the client knows: one of its pages came before
    first, second, third = push("a.test", 1), push("a.test", 2), push("a.test", 3)
    pages.sift(first)
    pages.sift(second)
    assert inline(first) and not inline(second)  # the first comes as it is, the next is announced
    assert second["params"]["seq"] == 2 and second["params"]["from_aid"] == "a.test"  # still says what
    pages.sift(third)
    assert not inline(third) and pages.hints == 2
    pages.handed_over("a.test", 2)  # not yet the newest pushed: the next is a hint still
    later = push("a.test", 4)
    pages.sift(later)
    assert not inline(later)
    pages.handed_over("a.test", 4)  # caught up: the next message comes with its push again
    caught_up = push("a.test", 5)
    pages.sift(caught_up)
    assert inline(caught_up)


def test_only_a_stored_direct_message_of_the_same_known_sender_is_made_a_hint() -> None:
    pages = PushPages()
    stranger_first, stranger_next = push("new.test", 1), push("new.test", 2)
    pages.sift(stranger_first)
    pages.sift(stranger_next)  # none of its messages has reached the link: the client may not know it
    assert inline(stranger_first) and inline(stranger_next)
    pages.handed_over("a.test", 0)
    pages.sift(push("a.test", 1))
    other_sender = push("b.test", 1)
    volatile = push("a.test", 2, storage="volatile")
    volatile_inside = push("a.test", 2)
    volatile_inside["params"]["inline_message"]["storage"] = "volatile"
    in_payload = push("a.test", 2, payload={"type": "text", "text": "2"})  # an older push's own copy
    no_seq = push("a.test", 0)
    group = {"jsonrpc": "2.0", "method": "event/group.message_created", "params": push("a.test", 2)["params"]}
    answer = {"jsonrpc": "2.0", "id": "rpc-1", "result": {"seq": 2}}
    for frame in (other_sender, volatile, volatile_inside, in_payload, no_seq, group):
        pages.sift(frame)
        assert inline(frame), frame
    pages.sift(answer)
    assert answer == {"jsonrpc": "2.0", "id": "rpc-1", "result": {"seq": 2}}
    assert pages.hints == 0


def test_a_sender_whose_page_never_came_counts_as_handled_after_a_while() -> None:
    pages = PushPages(stale_after=0.05)
    pages.handed_over("a.test", 0)
    pages.sift(push("a.test", 1))  # its page never comes (the client found it already seen, say)
    time.sleep(0.06)
    late = push("a.test", 2)
    pages.sift(late)
    assert inline(late)


def test_it_remembers_a_bounded_number_of_senders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push_pages, "SENDERS_KEPT", 3)
    pages = PushPages()
    for n in range(10):
        pages.handed_over(f"s{n}.test", 0)
        pages.sift(push(f"s{n}.test", 1))
    assert len(pages._known) == 3 and len(pages._waiting) == 3  # the newest three, each way
    again = push("s9.test", 2)
    pages.sift(again)  # one of those still remembered: its push behind the one on its way is a hint
    assert not inline(again)
    forgotten = push("s0.test", 2)
    pages.sift(forgotten)  # forgotten: its push simply comes with its message
    assert inline(forgotten)


async def test_a_burst_from_one_sender_arrives_in_a_page_in_order_once_each_acknowledged_after_the_archive(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    Gate.release = asyncio.Event()
    slow = f"holder.{info.issuer}"
    runtime, agent = await bridged(info, "holder", agent_named("holder", Gate))
    user = await plain_clients(info, "burst")
    await user.send(slow, {"type": "text", "text": "first"})
    await eventually(lambda: agent.stats.received == 1, what="the first message handed over")
    count = 30
    sent = [await user.send(slow, {"type": "text", "text": str(n)}) for n in range(1, count + 1)]
    # "1" is handed over with its push and waits behind "first"; every push after it is a hint.
    link = agent._link(slow)
    await eventually(lambda: link.push_pages.hints == count - 1, what="the pushes behind the second made hints")
    assert agent.stats.received == 2
    Gate.release.set()
    await gateway.events.wait("message.acked", receiver=slow, ack_seq=sent[-1]["seq"])
    texts = [m.text for m in committed(runtime, slow)]
    assert texts == ["first", *(str(n) for n in range(1, count + 1))]  # in order, once each, all committed when acknowledged
    assert agent.stats.received == count + 1
    assert agent.stats.pages <= 4  # "first", "1", and the rest pulled in a page (or two, should one be cut)
    acks = [e.fields["ack_seq"] for e in gateway.events.find("message.acked", receiver=slow)]
    assert len(acks) <= 4 and max(acks) == sent[-1]["seq"]  # one acknowledgement per page, not per message


async def test_a_new_sender_whose_messages_all_come_at_once_has_every_one_delivered_in_order(
    gateway: GatewayServer, bridged: Bridged, plain_clients: Clients
) -> None:
    info = info_of(gateway)
    desk = f"desk.{info.issuer}"
    runtime, agent = await bridged(info, "desk", inbox_named("desk"))
    stranger = await plain_clients(info, "stranger")
    count = 12
    sent = await asyncio.gather(*(stranger.send(desk, {"type": "text", "text": str(n)}) for n in range(count)))
    await gateway.events.wait("message.acked", receiver=desk, ack_seq=max(answer["seq"] for answer in sent))
    received = committed(runtime, desk)
    by_seq = {answer["seq"]: str(n) for n, answer in enumerate(sent)}
    assert [m.text for m in received] == [by_seq[seq] for seq in sorted(by_seq)]  # each once, in the network's order
    assert agent.stats.received >= count  # a message handed over twice is one the channel dropped
