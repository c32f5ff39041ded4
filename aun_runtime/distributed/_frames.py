"""Batch frames: several CloudEvents in one write of the data stream, between our own ends only.

autogen-ext's data stream carries one `agents.Message` per write, and a write costs more than
the rest of a message's way through a worker (the largest single cost of a flood, at both ends).
So where both ends are ours, what is queued for the stream when it is free to write goes out as
one frame: a CloudEvent of type `aun.batch` whose `binary_data` is an `aun.EventBatch`
(`repeated io.cloudevents.v1.CloudEvent events = 1`). Nothing waits to be batched: a frame holds
what was already queued, so a lone message leaves alone and at once, and a flood fills frames.

* A worker packs what it sends; the host unpacks a frame and takes each event exactly as if it had
  come alone (the same checks: a delivery must carry the stream's own worker as its origin, and so
  on), refusing the whole frame if any event is refused.
* Each end packs only for a peer that said it reads frames: a worker in its hello, the host in its
  directory snapshot (`"frames": true`), so either end may be of an older version; plain
  autogen-ext clients keep getting one event per write.
* Frames do not nest, carry no `aun.hello` (a session's first message travels alone) and hold at
  most `MAX_FRAME_EVENTS` events and `MAX_FRAME_BYTES` bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory  # type: ignore[import-untyped]

from ._wire import HELLO_TYPE

__all__ = ["BATCH_TYPE", "MAX_FRAME_BYTES", "MAX_FRAME_EVENTS", "FrameError", "drain", "pack", "unpack"]

BATCH_TYPE = "aun.batch"
#: Events in one frame. A frame is written when the stream is free, so this is reached only by a
#: flood, where 256 events make the per-write cost negligible.
MAX_FRAME_EVENTS = 256
#: Bytes of events in one frame, far below the stream's 8 MiB message limit; a larger event
#: travels alone, as it would without frames.
MAX_FRAME_BYTES = 1 << 20

_Event = cloudevent_pb2.CloudEvent
_Message = agent_worker_pb2.Message


def _batch_class() -> Any:
    """`aun.EventBatch`, declared at run time next to autogen-ext's CloudEvent (no .proto build)."""
    pool = descriptor_pool.Default()
    name = "aun_runtime/distributed/event_batch.proto"
    try:
        pool.FindFileByName(name)
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto(
            name=name, package="aun", dependency=[cloudevent_pb2.DESCRIPTOR.name], syntax="proto3"
        )
        batch = proto.message_type.add(name="EventBatch")
        batch.field.add(
            name="events",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
            type_name=f".{_Event.DESCRIPTOR.full_name}",
        )
        pool.AddSerializedFile(proto.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("aun.EventBatch"))


_EventBatch = _batch_class()


class FrameError(ValueError):
    """A batch frame that cannot be read, or holds what frames may not hold."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _frame(parts: list[bytes], count: int) -> _Message:
    event = _Event(id=f"{BATCH_TYPE}/{count}", spec_version="1.0", type=BATCH_TYPE, source="default", binary_data=b"".join(parts))
    return _Message(cloudEvent=event)


def _batchable(item: _Message) -> bool:
    return item.WhichOneof("message") == "cloudEvent" and item.cloudEvent.type not in (HELLO_TYPE, BATCH_TYPE)


def pack(items: Sequence[_Message]) -> Iterator[_Message]:
    """The messages to write for `items`, in order: runs of two or more events become frames.

    Anything that may not go in a frame (an RPC response, a hello, an oversized event) ends the
    current frame and goes alone, so the order of everything on the stream is kept.
    """
    if len(items) == 1:  # the usual case when nothing queues up: no frame, nothing serialised twice
        yield items[0]
        return
    parts: list[bytes] = []
    first: _Message | None = None
    size = 0

    def flush() -> Iterator[_Message]:
        nonlocal first, size
        if len(parts) > 2:  # two parts per event
            yield _frame(parts, len(parts) // 2)
        elif first is not None:
            yield first
        parts.clear()
        first, size = None, 0

    for item in items:
        data = item.cloudEvent.SerializeToString() if _batchable(item) else None
        if data is None or len(data) > MAX_FRAME_BYTES:
            yield from flush()
            yield item
            continue
        if len(parts) // 2 >= MAX_FRAME_EVENTS or size + len(data) > MAX_FRAME_BYTES:
            yield from flush()
        if first is None:
            first = item
        parts += (b"\n" + _varint(len(data)), data)  # field 1, length-delimited: EventBatch's wire form
        size += len(data)
    yield from flush()


def unpack(frame: _Event) -> Sequence[_Event]:
    """The events of a batch frame, in order.

    Raises:
        FrameError: the frame is not an `aun.EventBatch`, is empty or too large, or holds a frame
            or a hello.
    """
    if len(frame.binary_data) > MAX_FRAME_BYTES + 16 * MAX_FRAME_EVENTS:
        raise FrameError("a batch frame larger than a frame may be")
    try:
        events = _EventBatch.FromString(frame.binary_data).events
    except message.DecodeError:
        raise FrameError("a batch frame whose data is not an aun.EventBatch") from None
    if not events or len(events) > MAX_FRAME_EVENTS:
        raise FrameError(f"a batch frame holds 1 to {MAX_FRAME_EVENTS} events")
    for event in events:
        if event.type in (BATCH_TYPE, HELLO_TYPE):
            raise FrameError(f"a batch frame may not hold {event.type}")
    return events  # type: ignore[no-any-return]


def drain(first: _Message, more: Callable[[], _Message | None], limit: int = MAX_FRAME_EVENTS) -> list[_Message]:
    """`first` and whatever else is queued already (`more` gives None when nothing is), at most
    `limit` in all: what one turn of a stream's writer sends."""
    items = [first]
    while len(items) < limit:
        item = more()
        if item is None:
            break
        items.append(item)
    return items
