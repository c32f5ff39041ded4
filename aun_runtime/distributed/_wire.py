"""What travels between workers and host beyond autogen-ext's own messages.

Everything rides on autogen-ext's data stream as CloudEvents, so the host stays autogen-ext's host:

* an AUN delivery is a publish on `aun.inbox.<aid>` whose attributes also carry the sending
  worker (`aunorigin`), the delivery's number in that worker's stream to the AID (`aunseq`) and
  the stream's lowest unacknowledged number (`aunbase`); from a worker that traces, any publish
  also carries `traceparent` (the span it was sent from) and `auncreated` (its create span);
* an acknowledgement is a publish on `aun.ack.<worker>` (JSON `{"worker": ..., "acks": {aid: n}}`);
* `aun.hello` (worker to host) and `aun.directory` (host to worker) carry the directory;
* `aun.batch` packs several of these events into one write, between a worker and the host (see
  `._frames`);
* group changes go through a small JSON service on the host's port, `/aun.Directory/<Method>`.

Every call a worker makes carries `client-id` (autogen-ext's, new per connection), `aun-worker`
(its name) and `aun-secret` (the secret that proves the name, see `._identity`). Topic and
agent types beginning with `aun.` are the runtime's own: the host lets a stream use them only as
the runtime does (its own AIDs' inboxes, its own acknowledgements).
"""

from __future__ import annotations

import json
from typing import Any

from autogen_core import JSON_DATA_CONTENT_TYPE
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

__all__ = [
    "ACK_PREFIX",
    "AUN_PREFIX",
    "BASE_ATTR",
    "CREATED_ATTR",
    "DIRECTORY_SERVICE",
    "DIRECTORY_TYPE",
    "HELLO_TYPE",
    "ORIGIN_ATTR",
    "SECRET_METADATA",
    "SEQ_ATTR",
    "WORKER_AGENT_PREFIX",
    "WORKER_METADATA",
    "control_event",
    "decode_json",
    "encode_json",
    "event_json",
]

#: Topic and agent types under this prefix belong to the runtime (inboxes, groups, acks, control).
AUN_PREFIX = "aun."
ORIGIN_ATTR = "aunorigin"
SEQ_ATTR = "aunseq"
BASE_ATTR = "aunbase"
#: A traced publish's create span (a W3C traceparent), which the receiver's process span links to.
CREATED_ATTR = "auncreated"
ACK_PREFIX = "aun.ack."
HELLO_TYPE = "aun.hello"
DIRECTORY_TYPE = "aun.directory"
#: The agent type under which a worker receives its acknowledgements: ``aun.worker.<name>``.
WORKER_AGENT_PREFIX = "aun.worker."
#: gRPC metadata key naming the worker on every call, next to autogen-ext's ``client-id``.
WORKER_METADATA = "aun-worker"
#: gRPC metadata key carrying the worker's secret, which proves its name (see :mod:`._identity`).
SECRET_METADATA = "aun-secret"
DIRECTORY_SERVICE = "aun.Directory"

_Attr = cloudevent_pb2.CloudEvent.CloudEventAttributeValue


def encode_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def decode_json(data: bytes) -> Any:
    return json.loads(data)


def control_event(topic_type: str, body: Any, *, sender: str = "aun.host") -> agent_worker_pb2.Message:
    """A CloudEvent carrying JSON control data (hello, directory, acks) on the data stream."""
    return agent_worker_pb2.Message(
        cloudEvent=cloudevent_pb2.CloudEvent(
            id=topic_type,
            spec_version="1.0",
            type=topic_type,
            source="default",
            attributes={
                "datacontenttype": _Attr(ce_string=JSON_DATA_CONTENT_TYPE),
                "dataschema": _Attr(ce_string=topic_type),
                "agagentsendertype": _Attr(ce_string=sender),
                "agagentsenderkey": _Attr(ce_string="default"),
                "agmsgkind": _Attr(ce_string="publish"),
            },
            binary_data=encode_json(body),
        )
    )


def event_json(event: cloudevent_pb2.CloudEvent) -> Any:
    return decode_json(event.binary_data)
