"""What a data stream may send, register and subscribe: the runtime's own names stay the runtime's.

A stream may send deliveries only as its own worker (`aunorigin`), acknowledge only deliveries
to AIDs registered on it, say hello only as the worker it proved to be, register only its own
`aun.worker.<name>` type of the runtime's types, and subscribe `aun.*` topics only for the AIDs it
holds. Each event of a batch frame is checked as if it had come alone. What breaks a rule is a
`Refusal`; an acknowledgement partly for others is cut down to what is the stream's own.

Apart from the servicer because these are the rules of one stream, checked on every message:
they read the stream's client and the message, and change nothing but the counters.
"""

from __future__ import annotations

import re

import grpc
from autogen_core import Subscription, TypeSubscription
from autogen_ext.runtimes.grpc.protos import cloudevent_pb2

from ..base._topics import GROUP_PREFIX, INBOX_PREFIX
from ._frames import FrameError, unpack
from ._heartbeat import HEARTBEAT_TYPE
from ._host_records import HostStats, Refusal, StreamClient
from ._wire import ACK_PREFIX, AUN_PREFIX, ORIGIN_ATTR, WORKER_AGENT_PREFIX, encode_json, event_json

__all__ = ["StreamRules"]

_Status = grpc.StatusCode
#: autogen-core's rule for agent types, with a length limit.
_AGENT_TYPE = re.compile(r"^[\w\-\.]+\Z")
_MAX_AGENT_TYPE_LENGTH = 255


class StreamRules:
    """The checks of what arrives on a stream; counts what it drops in `stats`."""

    def __init__(self, stats: HostStats) -> None:
        self.stats = stats

    def checked_event(self, client: StreamClient, event: cloudevent_pb2.CloudEvent) -> cloudevent_pb2.CloudEvent | None:
        """An event on the stream of `client`: what may pass, as what; None to drop it."""
        topic = event.type
        if topic.startswith(INBOX_PREFIX):  # a delivery (the hot path: one lookup, one comparison)
            origin = event.attributes.get(ORIGIN_ATTR)
            if origin is not None and origin.ce_string != client.worker:
                raise Refusal(
                    _Status.PERMISSION_DENIED,
                    f"a delivery that claims to come from worker {origin.ce_string[:100]!r} arrived on the stream of {client.who}",
                )
            return event
        if topic.startswith(AUN_PREFIX):
            return self._aun_event(client, event)
        return event

    def frame_events(self, client: StreamClient, frame: cloudevent_pb2.CloudEvent) -> list[cloudevent_pb2.CloudEvent]:
        """What passes of a batch frame's events, each checked as if it had come alone. One that is
        refused refuses the whole frame: nothing of it is routed, and the stream ends."""
        try:
            events = unpack(frame)
        except FrameError as exc:
            raise Refusal(_Status.INVALID_ARGUMENT, str(exc)) from None
        checked = [self.checked_event(client, event) for event in events]
        return [event for event in checked if event is not None]

    def _aun_event(self, client: StreamClient, event: cloudevent_pb2.CloudEvent) -> cloudevent_pb2.CloudEvent | None:
        """An event on another of the runtime's topics: what may pass, as what; None to drop it."""
        topic = event.type
        if topic.startswith(GROUP_PREFIX):
            return event
        if topic == HEARTBEAT_TYPE:  # noted as anything on the stream is (`client.heard`), not routed
            return None
        if topic.startswith(ACK_PREFIX):
            return self._checked_ack(client, event)
        raise Refusal(_Status.PERMISSION_DENIED, f"{topic[:100]!r} is the runtime's own topic; no stream may publish on it")

    def _checked_ack(self, client: StreamClient, event: cloudevent_pb2.CloudEvent) -> cloudevent_pb2.CloudEvent | None:
        """An acknowledgement passes only for AIDs registered on the stream it came on: only that
        stream received the deliveries it acknowledges. The rest is dropped (its sender keeps the
        messages and sends them again, so nothing is lost by a dropped acknowledgement)."""
        try:
            body = event_json(event)
        except ValueError:
            raise Refusal(_Status.INVALID_ARGUMENT, "an acknowledgement whose body is not JSON") from None
        acks = body.get("acks") if isinstance(body, dict) else None
        if not isinstance(acks, dict) or not all(type(through) is int for through in acks.values()):
            raise Refusal(_Status.INVALID_ARGUMENT, 'an acknowledgement is {"acks": {"<aid>": <handled through>}}')
        foreign = sorted(aid for aid in acks if aid not in client.types)
        if not foreign:
            return event
        self.stats.acks_refused += 1
        client.warn_once(
            "ack",
            "host: refused an acknowledgement from %s for %s: not registered on its stream, so it did not receive what it acknowledges"
            " (further refusals on this stream are only counted)",
            client.who,
            ", ".join(repr(aid[:100]) for aid in foreign[:5]),
        )
        kept = {aid: through for aid, through in acks.items() if aid in client.types}
        if not kept:
            return None
        forwarded = cloudevent_pb2.CloudEvent()
        forwarded.CopyFrom(event)
        forwarded.binary_data = encode_json({**body, "acks": kept})
        return forwarded

    def read_hello(self, client: StreamClient, event: cloudevent_pb2.CloudEvent) -> None:
        """A worker's hello on its own stream: note what it says it reads and sends."""
        if client.worker is None:
            raise Refusal(_Status.PERMISSION_DENIED, "aun.hello on a stream that presented no worker name and secret")
        try:
            body = event_json(event)
        except ValueError:
            raise Refusal(_Status.INVALID_ARGUMENT, "aun.hello whose body is not JSON") from None
        if not isinstance(body, dict) or body.get("worker") != client.worker:
            raise Refusal(_Status.INVALID_ARGUMENT, f'aun.hello is {{"worker": "{client.worker}"}} on the stream of worker {client.worker}')
        client.frames = body.get("frames") is True
        client.heartbeat = body.get("heartbeat") is True

    def check_agent_type(self, agent_type: str, worker: str | None) -> None:
        """An agent type `worker` (None: a plain client) may register: well formed, and of the
        runtime's own types only its own worker agent."""
        if len(agent_type) > _MAX_AGENT_TYPE_LENGTH or not _AGENT_TYPE.match(agent_type):
            raise Refusal(_Status.INVALID_ARGUMENT, f"{agent_type[:100]!r} is not an agent type (letters, digits, '_', '-', '.')")
        if agent_type.startswith(AUN_PREFIX) and (worker is None or agent_type != WORKER_AGENT_PREFIX + worker):
            raise Refusal(
                _Status.PERMISSION_DENIED,
                f"{agent_type} is one of the runtime's own types: a worker registers only {WORKER_AGENT_PREFIX}<its own name>",
            )

    def check_subscription(self, client: StreamClient | None, subscription: Subscription, owned: bool) -> None:
        """`aun.*` topics only for what the stream holds: its AIDs' inboxes and groups, its own
        acknowledgements. And nobody subscribes another worker's AID (`owned`: some worker owns
        the subscription's agent type) to anything."""
        worker = client.worker if client is not None else None
        types = client.types if client is not None else set()
        agent_type: str = getattr(subscription, "agent_type", "")
        if isinstance(subscription, TypeSubscription):
            topic = subscription.topic_type
            reserved = topic.startswith(AUN_PREFIX)
            allowed = agent_type in types and (
                topic == INBOX_PREFIX + agent_type
                or topic.startswith(GROUP_PREFIX)
                or (worker is not None and topic == ACK_PREFIX + worker and agent_type == WORKER_AGENT_PREFIX + worker)
            )
        else:
            topic = getattr(subscription, "topic_type_prefix", "")
            reserved = topic.startswith(AUN_PREFIX) or AUN_PREFIX.startswith(topic)
            allowed = False
        if reserved and not allowed:
            raise Refusal(
                _Status.PERMISSION_DENIED,
                f"topic {topic[:100]!r} is the runtime's own: a stream subscribes to it only for the AIDs registered on it",
            )
        if (owned or agent_type.startswith(AUN_PREFIX)) and agent_type not in types:
            raise Refusal(_Status.PERMISSION_DENIED, f"{agent_type[:100]!r} is not registered on this stream")
