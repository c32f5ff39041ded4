"""A hand-made client of the host for the security tests: any name, any secret, any bytes."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

from aun_runtime.distributed._wire import control_event, encode_json

TIMEOUT = 5.0


def _raw(data: bytes) -> bytes:
    return data


def delivery(aid: str, origin: str, seq: int, text: str = "forged") -> bytes:
    """A delivery to ``aid`` that says it comes from worker ``origin`` (stream number ``seq``)."""
    attr = cloudevent_pb2.CloudEvent.CloudEventAttributeValue
    event = cloudevent_pb2.CloudEvent(
        id=str(uuid.uuid4()),
        spec_version="1.0",
        type=f"aun.inbox.{aid}",
        source="default",
        attributes={"aunorigin": attr(ce_string=origin), "aunseq": attr(ce_integer=seq), "aunbase": attr(ce_integer=seq)},
        binary_data=text.encode(),
    )
    return agent_worker_pb2.Message(cloudEvent=event).SerializeToString()


def ack(origin: str, acks: dict[str, int]) -> bytes:
    """An acknowledgement to worker ``origin``: "``aid`` handled through n"."""
    return control_event(f"aun.ack.{origin}", {"worker": "forger", "acks": acks}).SerializeToString()


def hello(name: str) -> bytes:
    return control_event("aun.hello", {"worker": name}, sender=name).SerializeToString()


class RawClient:
    """A connection to the host that presents ``name`` and ``secret`` (either may be None)."""

    def __init__(self, address: str, name: str | None = None, secret: str | None = None) -> None:
        self.channel = grpc.aio.insecure_channel(address)
        self.metadata: list[tuple[str, str]] = [("client-id", str(uuid.uuid4()))]
        if name is not None:
            self.metadata.append(("aun-worker", name))
        if secret is not None:
            self.metadata.append(("aun-secret", secret))
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stream: Any = None

    async def close(self) -> None:
        self._queue.put_nowait(None)
        await self.channel.close()

    async def call(self, method: str, body: bytes) -> tuple[grpc.StatusCode, Any]:
        """A unary call with ``body`` as it is: (status, answer or details)."""
        call = self.channel.unary_unary(method, request_serializer=_raw, response_deserializer=_raw)
        try:
            return grpc.StatusCode.OK, await call(body, metadata=self.metadata, timeout=TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details()

    async def json(self, method: str, body: Any) -> tuple[grpc.StatusCode, Any]:
        return await self.call(f"/aun.Directory/{method}", encode_json(body))

    def open(self) -> None:
        """Open the data stream; :meth:`send` puts bytes on it."""

        async def requests() -> AsyncIterator[bytes]:
            while (item := await self._queue.get()) is not None:
                yield item

        call = self.channel.stream_stream("/agents.AgentRpc/OpenChannel", request_serializer=_raw, response_deserializer=_raw)
        self.stream = call(requests(), metadata=self.metadata)

    def send(self, *messages: bytes) -> None:
        for message in messages:
            self._queue.put_nowait(message)

    async def read(self) -> bytes:
        """The next message the host sends on the stream (raises when the host ends it)."""
        message = await asyncio.wait_for(self.stream.read(), TIMEOUT)
        if message is grpc.aio.EOF:
            raise EOFError("the host closed the stream")
        return bytes(message)

    async def ended(self) -> tuple[grpc.StatusCode, str]:
        """Wait for the host to end the stream: its status and details."""
        try:
            while True:
                await self.read()
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""
        except EOFError:
            return await self.stream.code(), await self.stream.details()

    async def register(self, agent_type: str) -> tuple[grpc.StatusCode, Any]:
        request = agent_worker_pb2.RegisterAgentTypeRequest(type=agent_type)
        return await self.call("/agents.AgentRpc/RegisterAgent", request.SerializeToString())


async def host_stats(address: str) -> dict[str, Any]:
    """The host's ``Stats`` answer (``stats``, ``aids``, ...), asked by a client with no name."""
    client = RawClient(address)
    try:
        code, answer = await client.json("Stats", {})
    finally:
        await client.close()
    assert code == grpc.StatusCode.OK, answer
    report: dict[str, Any] = json.loads(answer)
    return report
