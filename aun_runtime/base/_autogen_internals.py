"""autogen-core's and autogen-ext's private names the runtime builds on: the one module that imports them.

The cores reuse a handful of names that the pinned autogen packages keep in private modules (the
serialization registry, the telemetry envelope, the single-threaded runtime's publish envelope, the
gRPC host's subscription codecs and callback channel). Each is imported here, once, and every other
module takes it from here by the same name, so that an upgrade is checked in one place:
`PRIVATE_IMPORTS` lists every one with its module, and `tests/base/test_autogen_internals.py` fails,
naming each that moved, when the pinned versions (`PINNED`) no longer have one where it is expected.
"""

from __future__ import annotations

from autogen_core._routed_agent import MessageHandler
from autogen_core._serialization import SerializationRegistry
from autogen_core._single_threaded_agent_runtime import PublishMessageEnvelope
from autogen_core._telemetry import (
    EnvelopeMetadata,
    MessageRuntimeTracingConfig,
    TraceHelper,
    get_telemetry_envelope_metadata,
)
from autogen_ext.runtimes.grpc._utils import subscription_from_proto, subscription_to_proto
from autogen_ext.runtimes.grpc._worker_runtime_host_servicer import CallbackChannelConnection

__all__ = [
    "PINNED",
    "PRIVATE_IMPORTS",
    "CallbackChannelConnection",
    "EnvelopeMetadata",
    "MessageHandler",
    "MessageRuntimeTracingConfig",
    "PublishMessageEnvelope",
    "SerializationRegistry",
    "TraceHelper",
    "get_telemetry_envelope_metadata",
    "subscription_from_proto",
    "subscription_to_proto",
]

#: The versions these names were found in (pyproject.toml pins the same).
PINNED = {"autogen-core": "0.7.5", "autogen-ext": "0.7.5"}

#: Every private name imported above: (module, name). The test reads this table from the source,
#: so a name that moved is named even when this module no longer imports.
PRIVATE_IMPORTS: tuple[tuple[str, str], ...] = (
    ("autogen_core._routed_agent", "MessageHandler"),
    ("autogen_core._serialization", "SerializationRegistry"),
    ("autogen_core._single_threaded_agent_runtime", "PublishMessageEnvelope"),
    ("autogen_core._telemetry", "EnvelopeMetadata"),
    ("autogen_core._telemetry", "MessageRuntimeTracingConfig"),
    ("autogen_core._telemetry", "TraceHelper"),
    ("autogen_core._telemetry", "get_telemetry_envelope_metadata"),
    ("autogen_ext.runtimes.grpc._utils", "subscription_from_proto"),
    ("autogen_ext.runtimes.grpc._utils", "subscription_to_proto"),
    ("autogen_ext.runtimes.grpc._worker_runtime_host_servicer", "CallbackChannelConnection"),
)
