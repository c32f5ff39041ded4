"""Batch frames: several events in one stream write, checked by the host event by event, sent
packed only to a worker that reads them, and never to a plain autogen-ext client."""

from __future__ import annotations

import asyncio
import json
import uuid

import grpc
import pytest
from autogen_core import (
    JSON_DATA_CONTENT_TYPE,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
    try_get_known_serializers_for_type,
)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2
from pydantic import BaseModel

from aun_runtime.distributed._frames import (
    BATCH_TYPE,
    MAX_FRAME_BYTES,
    MAX_FRAME_EVENTS,
    FrameError,
    pack,
    unpack,
)
from aun_runtime.distributed._link import _drain
from aun_runtime.distributed._wire import control_event

from .processes import Process, start_host, wait_until
from .raw import RawClient, hello, host_stats

_Attr = cloudevent_pb2.CloudEvent.CloudEventAttributeValue


class Ping(BaseModel):
    n: int


class PingSink(RoutedAgent):
    def __init__(self, seen: list[int], expected: int, done: asyncio.Event) -> None:
        super().__init__("sink")
        self.seen = seen
        self.expected = expected
        self.done = done

    @event
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        self.seen.append(message.n)
        if len(self.seen) >= self.expected:
            self.done.set()


def _ping(topic: str, n: int) -> agent_worker_pb2.Message:
    """A plain autogen-ext publish of ``Ping(n)`` on ``topic``, as autogen-ext's worker makes it."""
    return agent_worker_pb2.Message(
        cloudEvent=cloudevent_pb2.CloudEvent(
            id=str(uuid.uuid4()),
            spec_version="1.0",
            type=topic,
            source="default",
            attributes={
                "datacontenttype": _Attr(ce_string=JSON_DATA_CONTENT_TYPE),
                "dataschema": _Attr(ce_string="Ping"),
                "agagentsendertype": _Attr(ce_string="tester"),
                "agagentsenderkey": _Attr(ce_string="default"),
                "agmsgkind": _Attr(ce_string="publish"),
            },
            binary_data=json.dumps({"n": n}).encode(),
        )
    )


def _delivery(aid: str, origin: str, seq: int) -> agent_worker_pb2.Message:
    return agent_worker_pb2.Message(
        cloudEvent=cloudevent_pb2.CloudEvent(
            id=str(uuid.uuid4()),
            spec_version="1.0",
            type=f"aun.inbox.{aid}",
            source="default",
            attributes={"aunorigin": _Attr(ce_string=origin), "aunseq": _Attr(ce_integer=seq), "aunbase": _Attr(ce_integer=1)},
            binary_data=b"{}",
        )
    )


def _frame_of(*messages: agent_worker_pb2.Message) -> bytes:
    (frame,) = pack(list(messages))
    assert frame.cloudEvent.type == BATCH_TYPE
    return bytes(frame.SerializeToString())


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes([*out, n])


def _batch_of(*events: bytes) -> bytes:
    """The bytes of an ``aun.EventBatch`` holding ``events`` (serialised CloudEvents), made by hand."""
    return b"".join(b"\n" + _varint(len(e)) + e for e in events)


def _raw_frame(data: bytes) -> bytes:
    event = cloudevent_pb2.CloudEvent(id="f", spec_version="1.0", type=BATCH_TYPE, source="default", binary_data=data)
    return bytes(agent_worker_pb2.Message(cloudEvent=event).SerializeToString())


# -- packing and unpacking -------------------------------------------------------------------------------


def test_pack_keeps_the_order_and_sends_alone_what_may_not_go_in_a_frame() -> None:
    response = agent_worker_pb2.Message(response=agent_worker_pb2.RpcResponse(request_id="r"))
    greeting = control_event("aun.hello", {"worker": "w"})
    items = [_ping("t", 0), _ping("t", 1), response, _ping("t", 2), greeting, _ping("t", 3), _ping("t", 4), _ping("t", 5)]
    written = list(pack(items))
    assert [m.cloudEvent.type or m.WhichOneof("message") for m in written] == [BATCH_TYPE, "response", "t", "aun.hello", BATCH_TYPE]
    assert written[1] is response and written[2] is items[3] and written[3] is greeting  # alone, as they were
    events = [*unpack(written[0].cloudEvent), written[2].cloudEvent, *unpack(written[4].cloudEvent)]
    assert [json.loads(e.binary_data)["n"] for e in events] == [0, 1, 2, 3, 4, 5]
    assert events[1] == items[1].cloudEvent  # every attribute, as it was queued


def test_pack_bounds_a_frame_by_events_and_bytes() -> None:
    many = [_ping("t", n) for n in range(MAX_FRAME_EVENTS + 3)]
    sizes = [len(unpack(m.cloudEvent)) if m.cloudEvent.type == BATCH_TYPE else 1 for m in pack(many)]
    assert sizes == [MAX_FRAME_EVENTS, 3]
    big = _ping("t", 0)
    big.cloudEvent.binary_data = b"x" * (MAX_FRAME_BYTES + 1)
    written = list(pack([_ping("t", 1), _ping("t", 2), big, _ping("t", 3)]))
    assert [m.cloudEvent.type for m in written] == [BATCH_TYPE, "t", "t"] and written[1] is big


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\xff\xff\xff", "not an aun.EventBatch"),
        (b"", "1 to"),
        (_frame_of(_ping("t", 0), _ping("t", 1))[4:], "not an aun.EventBatch"),
    ],
)
def test_unpack_refuses_what_is_not_a_frame(data: bytes, error: str) -> None:
    with pytest.raises(FrameError, match=error):
        unpack(cloudevent_pb2.CloudEvent(type=BATCH_TYPE, binary_data=data))


# -- the host ---------------------------------------------------------------------------------------------


async def test_a_frame_with_one_forged_origin_is_refused_whole_and_nothing_of_it_is_routed(procs: list[Process]) -> None:
    host, address = start_host()
    procs.append(host)
    forger = RawClient(address, "forger", "the forger's secret")
    try:
        forger.open()
        forger.send(hello("forger"))
        await forger.read()  # the directory snapshot: the stream is open
        # Its own deliveries around one that claims to come from another worker.
        forger.send(_frame_of(_delivery("sink.local", "forger", 1), _delivery("sink.local", "source", 7), _delivery("sink.local", "forger", 2)))
        code, details = await forger.ended()
        assert code == grpc.StatusCode.PERMISSION_DENIED and "'source'" in details
    finally:
        await forger.close()
    stats = (await host_stats(address))["stats"]
    # Routing a delivery nobody holds counts it as not delivered: none of the frame got that far.
    assert (stats["events_routed"], stats["not_delivered"], stats["refused"]) == (0, 0, 1)


async def test_a_malformed_frame_is_invalid_argument_and_the_host_serves_on(procs: list[Process]) -> None:
    host, address = start_host()
    procs.append(host)
    nested = _frame_of(_ping("t", 0), _ping("t", 1))
    inner = agent_worker_pb2.Message.FromString(nested).cloudEvent.SerializeToString()
    greeting = control_event("aun.hello", {"worker": "garbage-2"}).cloudEvent.SerializeToString()
    ping = _ping("t", 0).cloudEvent.SerializeToString()
    frames = [
        _raw_frame(b"\xff\xff\xff not protobuf"),
        _raw_frame(b""),  # no events
        _raw_frame(_batch_of(ping, greeting)),  # a hello travels alone
        _raw_frame(_batch_of(ping, inner)),  # frames do not nest
        _raw_frame(_batch_of(*[ping] * (MAX_FRAME_EVENTS + 1))),
    ]
    for n, frame in enumerate(frames):
        client = RawClient(address, f"garbage-{n}", "a secret")
        try:
            client.open()
            client.send(hello(f"garbage-{n}"))
            await client.read()
            client.send(frame)
            code, details = await client.ended()
        finally:
            await client.close()
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (n, code, details)
        assert "frame" in details
    stats = (await host_stats(address))["stats"]
    assert (stats["refused"], stats["events_routed"], stats["not_delivered"]) == (len(frames), 0, 0)
    wait_until(lambda: sum("host: refused" in line for line in host.lines) >= len(frames), what="a line per refusal")
    assert "Traceback" not in host.output


async def _pings(client: RawClient, count: int) -> list[tuple[str, list[int]]]:
    """Read from the host until ``count`` pings came: per write that held pings, its type and their numbers."""
    writes: list[tuple[str, list[int]]] = []
    while sum(len(numbers) for _, numbers in writes) < count:
        message = agent_worker_pb2.Message.FromString(await client.read())
        kind = message.cloudEvent.type
        events = unpack(message.cloudEvent) if kind == BATCH_TYPE else [message.cloudEvent]
        numbers = [json.loads(e.binary_data)["n"] for e in events if e.type == "pings"]  # not the directory's changes
        if numbers:
            writes.append((kind, numbers))
    return writes


async def test_the_host_sends_frames_only_to_a_worker_that_reads_them(procs: list[Process]) -> None:
    host, address = start_host()
    procs.append(host)
    reader = RawClient(address, "reader", "the reader's secret")  # says it reads frames, like our workers
    plain = RawClient(address, "plainreader", "its secret")  # a hello without "frames"
    sender = RawClient(address)
    try:
        for client, body in ((reader, {"worker": "reader", "frames": True}), (plain, {"worker": "plainreader"})):
            client.open()
            client.send(control_event("aun.hello", body).SerializeToString())
            snapshot = agent_worker_pb2.Message.FromString(await client.read()).cloudEvent
            assert json.loads(snapshot.binary_data)["frames"] is True  # so a worker may send it frames
        for client, agent_type in ((reader, "reader_agent"), (plain, "plain_agent")):
            code, _ = await client.register(agent_type)
            assert code == grpc.StatusCode.OK
            request = agent_worker_pb2.AddSubscriptionRequest(
                subscription=agent_worker_pb2.Subscription(
                    id=agent_type, typeSubscription=agent_worker_pb2.TypeSubscription(topic_type="pings", agent_type=agent_type)
                )
            )
            code, _ = await client.call("/agents.AgentRpc/AddSubscription", request.SerializeToString())
            assert code == grpc.StatusCode.OK
        sender.open()
        sender.send(_frame_of(*[_ping("pings", n) for n in range(5)]))
        # The frame's events are routed together, so they are queued together for the reader: one write.
        assert await _pings(reader, 5) == [(BATCH_TYPE, [0, 1, 2, 3, 4])]
        assert await _pings(plain, 5) == [("pings", [n]) for n in range(5)]
    finally:
        for client in (reader, plain, sender):
            await client.close()


async def test_plain_autogen_workers_still_publish_and_receive_through_the_host(host: str) -> None:
    publisher = GrpcWorkerAgentRuntime(host)
    subscriber = GrpcWorkerAgentRuntime(host)
    seen: list[int] = []
    done = asyncio.Event()
    for runtime in (publisher, subscriber):
        runtime.add_message_serializer(try_get_known_serializers_for_type(Ping))
        await runtime.start()
    try:
        await PingSink.register(subscriber, "pingsink", lambda: PingSink(seen, 50, done))
        await subscriber.add_subscription(TypeSubscription("pings", "pingsink"))
        for n in range(50):
            await publisher.publish_message(Ping(n=n), TopicId("pings", "default"))
        await asyncio.wait_for(done.wait(), timeout=10)
        assert seen == list(range(50))
    finally:
        await publisher.stop()
        await subscriber.stop()



async def test_a_worker_packs_only_for_a_host_that_reads_frames() -> None:
    for host_reads_frames, expected in ((False, ["pings"] * 3), (True, [BATCH_TYPE])):
        queue: asyncio.Queue[agent_worker_pb2.Message | None] = asyncio.Queue()
        for n in range(3):
            queue.put_nowait(_ping("pings", n))
        queue.put_nowait(None)  # the session ends
        reads = host_reads_frames
        written = [m async for m in _drain(queue, lambda: reads)]  # noqa: B023 (used before the next turn)
        assert [m.cloudEvent.type for m in written] == expected
