"""The small records every part of the host's servicer shares: its counters, a refusal, one data
stream's client, and who a call comes from.

Apart from the servicer so that its collaborators (the directory, the streams, the stream rules,
routing, registration, subscriptions) can each name them without importing one another.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from ._wire import WORKER_METADATA

__all__ = ["AWAY", "HELD", "HostStats", "Refusal", "StreamClient", "call_metadata", "caller_name"]

logger = logging.getLogger("aun_runtime.distributed")

#: An AID's status in the directory: on a live stream of its worker, or kept for a worker that vanished.
HELD, AWAY = "held", "away"


@dataclass
class HostStats:
    """What the host saw, counted. `refused`: calls and streams refused (an identity that does
    not match, a reserved name, a malformed request); `acks_refused`: acknowledgements dropped
    because their stream does not hold the AID they acknowledge."""

    workers_connected: int = 0
    connects: int = 0
    disconnects: int = 0
    registrations: int = 0
    events_routed: int = 0
    not_delivered: int = 0
    rpc_refused: int = 0
    refused: int = 0
    acks_refused: int = 0


class Refusal(Exception):
    """A call, or a message on a stream, that the host refuses: the call (or stream) ends with
    `code` and `message`, and the host logs one line at `level`."""

    def __init__(self, code: grpc.StatusCode, message: str, *, level: int = logging.WARNING) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.level = level


@dataclass(eq=False)
class StreamClient:
    """One data stream: whose it is (`worker` None: a plain autogen-ext client, no identity)."""

    client_id: str
    worker: str | None
    peer: str
    greeted: bool = False  # sent its hello (and got the directory snapshot)
    frames: bool = False  # said in its hello that it reads batch frames (see ._frames)
    heartbeat: bool = False  # said in its hello that it sends heartbeats (see ._heartbeat)
    heard: float = field(default_factory=time.monotonic)  # when its stream last carried anything
    types: set[str] = field(default_factory=set)  # registered on this stream: it may acknowledge these
    warned: set[str] = field(default_factory=set)

    @property
    def who(self) -> str:
        return f"worker {self.worker}" if self.worker is not None else f"client {self.client_id[:8]} at {self.peer}"

    def warn_once(self, key: str, message: str, *args: Any) -> None:
        """Log `message` the first time this stream does what `key` names; later, stay quiet."""
        if key not in self.warned:
            self.warned.add(key)
            logger.warning(message, *args)


def call_metadata(context: Any) -> dict[str, str]:
    """The metadata a gRPC call came with, as a dict."""
    return {k: v for k, v in (context.invocation_metadata() or ())}


def caller_name(context: Any) -> str:
    """Who a call comes from, for a log line: its peer, and the worker name it gave, if any."""
    name = call_metadata(context).get(WORKER_METADATA)
    peer = context.peer()
    return f"{peer} (worker {name[:100]!r})" if name is not None else peer
