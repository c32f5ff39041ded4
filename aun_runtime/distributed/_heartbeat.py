"""Heartbeats: a worker's event loop tells the host, every second, that it still runs.

The host's gRPC keepalive pings are answered by gRPC's own threads, so a worker whose event loop
is blocked (a handler that sleeps or computes without awaiting) still answers them: its stream
looks alive while nothing on it is handled. So a worker whose host says it reads heartbeats (its
directory snapshot, `"heartbeat": true`) sends `aun.heartbeat` on its data stream from its event
loop every `HEARTBEAT_INTERVAL`, saying so in its hello; the host ends the stream of such a worker
once it has heard nothing on it for `HEARTBEAT_TIMEOUT`, as if the connection had dropped: its
AIDs are *away*, its service instances get nothing, and what it had not acknowledged goes to the
other instances. When its loop runs again the worker finds its stream ended and connects again.
Either end may be of an older version: a heartbeat is sent only to a host that reads them, and a
host ends for silence only the streams of workers that send them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from ._wire import control_event

__all__ = ["HEARTBEAT_INTERVAL", "HEARTBEAT_TIMEOUT", "HEARTBEAT_TYPE", "beat", "watch"]

HEARTBEAT_TYPE = "aun.heartbeat"
#: Seconds between a worker's heartbeats.
HEARTBEAT_INTERVAL = 1.0
#: Seconds of silence after which the host ends a heartbeating worker's stream: five missed
#: heartbeats, so that a loop slowed by a busy machine is not taken for a blocked one.
HEARTBEAT_TIMEOUT = 5.0


async def beat(worker: str, send: Callable[[agent_worker_pb2.Message], object]) -> None:
    """Send a heartbeat every `HEARTBEAT_INTERVAL` from this event loop, until cancelled."""
    while True:
        send(control_event(HEARTBEAT_TYPE, {}, sender=worker))
        await asyncio.sleep(HEARTBEAT_INTERVAL)


async def watch(heard: Callable[[], float], on_silent: Callable[[float], Awaitable[None]]) -> None:
    """Call `on_silent` (with the seconds of silence) once nothing has been heard for
    `HEARTBEAT_TIMEOUT`: `heard()` gives the `time.monotonic()` of the last message. Checks twice
    a second."""
    while True:
        await asyncio.sleep(HEARTBEAT_INTERVAL / 2)
        silent = time.monotonic() - heard()
        if silent > HEARTBEAT_TIMEOUT:
            await on_silent(silent)
            return
