"""The worker's connection to its host: open, keep, and open again after any loss.

autogen-ext's worker connects once and never again (after a host restart it looks healthy and
receives nothing). The link runs sessions in a loop: connect, say hello, receive the directory
snapshot, let the worker register everything it holds, then read until the stream breaks; then wait
(exponential backoff with jitter, 0.05 s doubling to 2 s) and start over. Each session is a new
autogen-ext client (a new `client-id`), so the host sees a fresh worker that registers again.
Every call carries the worker's name and its secret (see `._identity`); a host that refuses
them (`UNAUTHENTICATED`, `PERMISSION_DENIED`) is reported to `on_refused`. What is queued for
the stream when it is free to write goes out as one batch frame, and frames from the host are read
event by event (see `._frames`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, agent_worker_pb2_grpc

from ..base._waiting import wait_set
from ._errors import HostUnavailableError
from ._frames import BATCH_TYPE, drain, pack, unpack
from ._heartbeat import beat
from ._tls import TLSConfig
from ._wire import (
    DIRECTORY_SERVICE,
    DIRECTORY_TYPE,
    HELLO_TYPE,
    SECRET_METADATA,
    WORKER_METADATA,
    control_event,
    decode_json,
    encode_json,
    event_json,
)

__all__ = ["HostLink"]

logger = logging.getLogger("aun_runtime.distributed")

#: Keepalive pings find a host that vanished without closing the connection (a cable, a VM).
KEEPALIVE_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 8 * 1024 * 1024),
    ("grpc.max_send_message_length", 8 * 1024 * 1024),
]
_FIRST_BACKOFF = 0.05
_MAX_BACKOFF = 2.0
#: Seconds one connection attempt (channel ready, snapshot received) may take.
ATTEMPT_TIMEOUT = 3.0
#: What a host answers when it does not accept the worker's name and secret.
REFUSED_CODES = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})


class HostLink:
    """Sessions with the host, one after another, for as long as the worker runs.

    Args:
        address: `host:port`, or several, comma-separated: hosts of which one serves at a time
            (standbys); after a failed or ended session the link tries the next.
        worker: the worker's name (sent as metadata on every call).
        secret: the secret that proves the name (sent as metadata on every call, nowhere else).
        tls: TLS settings, or None for a plain connection.
        on_message: called with every message the host sends (also the attribute `on_message`,
            which its owner may set once, before `start`, when the reader needs the link to exist).
        on_ready: awaited after the snapshot, before the session counts as connected.
        on_lost: called when a session ends.
        on_refused: called when the host refuses the worker's identity (the link keeps trying).
    """

    def __init__(
        self,
        address: str,
        worker: str,
        tls: TLSConfig | None,
        *,
        secret: str,
        on_message: Callable[[agent_worker_pb2.Message], None],
        on_ready: Callable[[], Awaitable[None]],
        on_lost: Callable[[], None],
        on_refused: Callable[[grpc.aio.AioRpcError], None] = lambda error: None,
    ) -> None:
        self.addresses = [part.strip() for part in address.split(",") if part.strip()]
        self.address = self.addresses[0]
        self.worker = worker
        self._secret = secret
        self.tls = tls
        self._on_refused = on_refused
        self.on_message = on_message
        self._on_ready = on_ready
        self._on_lost = on_lost
        self._queue: asyncio.Queue[agent_worker_pb2.Message | None] | None = None
        self._channel: grpc.aio.Channel | None = None
        self._client_id = ""
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._snapshot = asyncio.Event()
        self._host_frames = False  # the host of this session reads batch frames (its snapshot says so)
        self._host_heartbeat = False  # the host of this session reads heartbeats (its snapshot says so)
        self.last_error: BaseException | None = None
        self.sessions = 0
        self.reconnects = 0

    # -- running -----------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"aun-link:{self.worker}")

    async def wait_connected(self, timeout: float | None) -> None:
        if not await wait_set(self._connected, timeout):
            raise TimeoutError(f"worker {self.worker} not connected to the host within {timeout} s")

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._end_session()

    async def _run(self) -> None:
        backoff = _FIRST_BACKOFF
        while True:
            try:
                await self._session()
                backoff = _FIRST_BACKOFF
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure ends the session; the loop opens the next
                self.last_error = exc
                logger.debug("session with %s failed", self.address, exc_info=exc)
            was_connected = self.connected
            await self._end_session()
            if was_connected:
                self._on_lost()
            error = self.last_error
            if isinstance(error, grpc.aio.AioRpcError) and error.code() in REFUSED_CODES:
                self._on_refused(error)
                backoff = _MAX_BACKOFF  # trying again soon would be refused again
            if not was_connected and len(self.addresses) > 1:  # that host does not serve: try the next
                self.address = self.addresses[(self.addresses.index(self.address) + 1) % len(self.addresses)]
            delay = backoff * (0.5 + random.random())
            backoff = min(backoff * 2, _MAX_BACKOFF)
            self.reconnects += 1
            reason = _describe(self.last_error) if self.last_error else "stream closed"
            logger.warning("worker %s: reconnecting to %s in %.2f s (%s)", self.worker, self.address, delay, reason)
            await asyncio.sleep(delay)

    async def _session(self) -> None:
        self.last_error = None
        self._client_id = str(uuid.uuid4())
        channel = self._channel = self._open_channel()
        await asyncio.wait_for(channel.channel_ready(), ATTEMPT_TIMEOUT)
        queue: asyncio.Queue[agent_worker_pb2.Message | None] = asyncio.Queue()
        self._queue = queue
        self._snapshot.clear()
        self._host_frames = self._host_heartbeat = False
        stub = agent_worker_pb2_grpc.AgentRpcStub(channel)
        call = stub.OpenChannel(_drain(queue, lambda: self._host_frames), metadata=self.metadata)
        # "frames": this worker reads batch frames (see :mod:`._frames`), so the host may send them;
        # "heartbeat": it sends heartbeats to a host that reads them (see :mod:`._heartbeat`).
        hello = {"worker": self.worker, "frames": True, "heartbeat": True}
        queue.put_nowait(control_event(HELLO_TYPE, hello, sender=self.worker))
        reader = asyncio.get_running_loop().create_task(self._read(call))
        snapshot = asyncio.ensure_future(self._snapshot.wait())
        beating: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait([reader, snapshot], timeout=ATTEMPT_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():  # the host ended the stream first: refused, or gone
                reader.result()
                raise ConnectionError("the host closed the stream before sending its directory")
            if not snapshot.done():
                raise TimeoutError
            if self._host_heartbeat:
                beating = asyncio.ensure_future(beat(self.worker, queue.put_nowait))
            self.stub = stub
            await self._on_ready()
            self._connected.set()
            self.sessions += 1
            logger.info("worker %s: connected to %s", self.worker, self.address)
            await reader
        finally:
            for task in (snapshot, reader, beating):
                task.cancel()
            await asyncio.gather(reader, snapshot, beating, return_exceptions=True)

    async def _read(self, call: Any) -> None:
        while True:
            message = await call.read()
            if message is grpc.aio.EOF:
                return
            if message.WhichOneof("message") != "cloudEvent":
                self.on_message(message)
                continue
            event = message.cloudEvent
            if event.type == BATCH_TYPE:  # the events of a frame, one by one, as if each came alone
                for inner in unpack(event):
                    self._on_event(agent_worker_pb2.Message(cloudEvent=inner))
            else:
                self._on_event(message)

    def _on_event(self, message: agent_worker_pb2.Message) -> None:
        self.on_message(message)
        if message.cloudEvent.type == DIRECTORY_TYPE and not self._snapshot.is_set():
            # The session's first directory message is the snapshot; a host that reads frames says so
            # in it (an older host does not, and gets one event per write).
            body = event_json(message.cloudEvent)
            self._host_frames = isinstance(body, dict) and body.get("frames") is True
            self._host_heartbeat = isinstance(body, dict) and body.get("heartbeat") is True
            self._snapshot.set()

    async def _end_session(self) -> None:
        self._connected.clear()
        if self._queue is not None:
            self._queue.put_nowait(None)
            self._queue = None
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close(grace=None)

    def _open_channel(self) -> grpc.aio.Channel:
        if self.tls is None:
            return grpc.aio.insecure_channel(self.address, options=KEEPALIVE_OPTIONS)
        options = KEEPALIVE_OPTIONS + self.tls.channel_options()
        return grpc.aio.secure_channel(self.address, self.tls.channel_credentials(), options=options)

    # -- calls -------------------------------------------------------------------------------------

    @property
    def metadata(self) -> list[tuple[str, str]]:
        return [("client-id", self._client_id), (WORKER_METADATA, self.worker), (SECRET_METADATA, self._secret)]

    def send(self, message: agent_worker_pb2.Message) -> bool:
        """Queue `message` on the current stream. False when there is none (the caller keeps it)."""
        queue = self._queue
        if queue is None:
            return False
        queue.put_nowait(message)
        return True

    async def directory_call(self, method: str, request: dict[str, Any]) -> Any:
        """A call to the host's directory service (group changes, leave, stats)."""
        channel = self._channel
        if channel is None or not (self.connected or self._snapshot.is_set()):
            raise HostUnavailableError(f"the host at {self.address} is not reachable now; try again once reconnected")
        call = channel.unary_unary(
            f"/{DIRECTORY_SERVICE}/{method}", request_serializer=encode_json, response_deserializer=decode_json
        )
        try:
            return await call(request, metadata=self.metadata, timeout=ATTEMPT_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            raise HostUnavailableError(f"the host at {self.address} did not answer: {_describe(exc)}") from None


async def _drain(
    queue: asyncio.Queue[agent_worker_pb2.Message | None], frames: Callable[[], bool]
) -> AsyncIterator[agent_worker_pb2.Message]:
    """The stream's writes: each turn takes what is queued by then and, if the host reads frames
    (`frames()`), packs it into frames."""
    ended = False

    def more() -> agent_worker_pb2.Message | None:
        nonlocal ended
        if ended or queue.empty():
            return None
        item = queue.get_nowait()
        ended = item is None
        return item

    while not ended:
        first = await queue.get()
        if first is None:
            return
        items = drain(first, more)
        for message in pack(items) if frames() else items:
            yield message


def _describe(error: BaseException) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details()}"
    if isinstance(error, TimeoutError):
        return "no answer in time"
    return f"{type(error).__name__}: {error}"
