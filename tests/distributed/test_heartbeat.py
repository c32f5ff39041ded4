"""Heartbeats on the data stream: the host ends the stream of a worker that said it sends them and
went silent, and keeps every other stream however quiet (see `aun_runtime.distributed._heartbeat`)."""

from __future__ import annotations

import asyncio
import json

import grpc
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2

from aun_runtime.distributed._frames import pack
from aun_runtime.distributed._heartbeat import HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, HEARTBEAT_TYPE
from aun_runtime.distributed._wire import control_event

from .processes import Process, start_host
from .raw import RawClient, host_stats


def _hello(name: str, **says: bool) -> bytes:
    return control_event("aun.hello", {"worker": name, **says}, sender=name).SerializeToString()


def _heartbeat(name: str) -> agent_worker_pb2.Message:
    return control_event(HEARTBEAT_TYPE, {}, sender=name)


async def _snapshot(client: RawClient) -> dict[str, object]:
    message = agent_worker_pb2.Message.FromString(await client.read())
    body: dict[str, object] = json.loads(message.cloudEvent.binary_data)
    return body


async def test_the_host_drops_a_silent_heartbeating_worker_and_keeps_the_others(procs: list[Process]) -> None:
    host, address = start_host()
    procs.append(host)
    silent = RawClient(address, "silent", "its secret")
    beating = RawClient(address, "beating", "its secret")
    older = RawClient(address, "older", "its secret")  # a worker of a version without heartbeats
    clients = (silent, beating, older)
    try:
        for client, says in ((silent, {"heartbeat": True}), (beating, {"heartbeat": True, "frames": True}), (older, {})):
            client.open()
            client.send(_hello(client.metadata[1][1], **says))
            assert (await _snapshot(client))["heartbeat"] is True  # the host says it reads them

        async def beat() -> None:
            while True:  # alone, and two in a frame: neither is refused nor routed
                beating.send(_heartbeat("beating").SerializeToString())
                beating.send(*(m.SerializeToString() for m in pack([_heartbeat("beating"), _heartbeat("beating")])))
                await asyncio.sleep(HEARTBEAT_INTERVAL)

        beats = asyncio.ensure_future(beat())
        try:
            code = await asyncio.wait_for(silent.stream.code(), HEARTBEAT_TIMEOUT + 10)
            details = await silent.stream.details()
            assert code == grpc.StatusCode.UNAVAILABLE and "no heartbeat" in details, (code, details)
            await asyncio.sleep(2 * HEARTBEAT_INTERVAL)  # the others outlive the bound by more than a check
            stats = (await host_stats(address))["stats"]
            assert (stats["workers_connected"], stats["disconnects"], stats["refused"]) == (2, 1, 0), stats
        finally:
            beats.cancel()
        assert not beating.stream.done() and not older.stream.done()
    finally:
        for client in clients:
            await client.close()
