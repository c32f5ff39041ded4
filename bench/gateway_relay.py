"""Benchmark: direct messages A -> local AUN gateway -> B on loopback, against a plain WebSocket echo.

Both servers run in their own process (the machine has two cores: one for the server, one for the
clients), measured in the same run:

- gateway: ``aun-runtime gateway`` (rate limit lifted). A sends ``message.send`` (JSON-RPC, plain
  payload); B receives the ``event/message.received`` push. Every message is committed to SQLite
  before it is pushed.
- echo: a ``websockets`` server that sends every frame straight back; A sends the same frames and
  receives them itself. It does no parsing, storage or routing: the floor for one WebSocket hop
  out and one back.

Latency: one message at a time, from A's send to the arrival (B's push, or A's echo). Throughput: a
window of messages in flight. The two paths are measured in alternating rounds and each figure is
the median over the rounds, so load from other processes on a shared machine hits both alike.
Prints one JSON line with messages/s, p50/p99 latency and the ratios gateway / echo.

    python bench/gateway_relay.py [--messages 5000] [--window 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import websockets
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

ECHO_SERVER = """
import asyncio, sys, websockets
async def echo(ws):
    async for frame in ws:
        await ws.send(frame)
async def main():
    async with websockets.serve(echo, "127.0.0.1", 0, compression=None, max_size=None) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
"""


def start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def rpc(ws: Any, method: str, params: dict[str, Any], request_id: str = "1") -> dict[str, Any]:
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("id") == request_id:
            if "error" in frame:
                raise RuntimeError(f"{method}: {frame['error']}")
            return dict(frame["result"])


async def login(url: str, aid: str) -> str:
    """Register ``aid`` and log in by hand; returns an access token."""
    key = ec.generate_private_key(ec.SECP256R1())
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    async with websockets.connect(url) as ws:
        await ws.recv()  # challenge
        cert = (await rpc(ws, "auth.create_aid", {"aid": aid, "public_key": base64.b64encode(spki).decode()}))["cert"]
        phase1 = await rpc(ws, "auth.aid_login1", {"aid": aid, "cert": cert, "client_nonce": "bench"})
        stamp = str(time.time())
        proof = key.sign(f"{phase1['nonce']}:{stamp}".encode(), ec.ECDSA(hashes.SHA256()))
        phase2 = await rpc(ws, "auth.aid_login2", {"aid": aid, "request_id": phase1["request_id"],
                                                   "nonce": phase1["nonce"], "client_time": stamp,
                                                   "signature": base64.b64encode(proof).decode()})
        return str(phase2["access_token"])


async def connect(url: str, token: str, device: str, delivery_mode: dict[str, str] | None = None) -> Any:
    ws = await websockets.connect(url, compression=None, max_size=None)
    challenge = json.loads(await ws.recv())
    params: dict[str, Any] = {"nonce": challenge["params"]["nonce"], "auth": {"token": token}, "device": {"id": device}}
    if delivery_mode is not None:
        params["delivery_mode"] = delivery_mode
    await rpc(ws, "auth.connect", params)
    return ws


class Path:
    """One way to move a message from A to an arrival: through the gateway, or an echo."""

    def __init__(self, sender: Any, receiver: Any, frame: Any) -> None:
        self.sender, self.receiver, self.frame = sender, receiver, frame
        self.arrived: asyncio.Queue[float] = asyncio.Queue()
        self._readers: list[asyncio.Task[None]] = []

    def start(self, is_arrival: Any) -> Path:
        async def read(ws: Any) -> None:
            async for text in ws:
                if is_arrival(text):
                    self.arrived.put_nowait(time.perf_counter())

        for ws in {self.sender, self.receiver}:
            self._readers.append(asyncio.create_task(read(ws)))
        return self

    async def latency(self, count: int) -> list[float]:
        samples = []
        for i in range(count):
            began = time.perf_counter()
            await self.sender.send(self.frame(i))
            samples.append((await self.arrived.get()) - began)
        return samples

    async def throughput(self, count: int, window: int) -> float:
        began = time.perf_counter()
        in_flight = 0
        for i in range(count):
            if in_flight >= window:
                await self.arrived.get()
                in_flight -= 1
            await self.sender.send(self.frame(i))
            in_flight += 1
        for _ in range(in_flight):
            await self.arrived.get()
        return count / (time.perf_counter() - began)

    async def close(self) -> None:
        for task in self._readers:
            task.cancel()
        for ws in {self.sender, self.receiver}:
            await ws.close()


def summary(samples: list[float], rate: float) -> dict[str, float]:
    ordered = sorted(samples)
    return {"msgs_per_s": rate, "p50_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[int(len(ordered) * 0.99) - 1] * 1000}


async def measure(path: Path, messages: int, window: int) -> dict[str, float]:
    samples = await path.latency(max(200, messages // 5))
    rate = await path.throughput(messages, window)
    return summary(samples, rate)


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in rounds), 3) for key in rounds[0]}


def ratios(measured: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    """Throughput, p50 and p99 of ``measured`` over those of its same-run ``baseline``."""
    return {
        "throughput_ratio": round(measured["msgs_per_s"] / baseline["msgs_per_s"], 3),
        "p50_ratio": round(measured["p50_ms"] / baseline["p50_ms"], 2),
        "p99_ratio": round(measured["p99_ms"] / baseline["p99_ms"], 2),
    }


async def main(messages: int, window: int, rounds: int) -> dict[str, Any]:
    payload = {"type": "text", "text": "x" * 100}
    with tempfile.TemporaryDirectory() as data:
        gateway, line = start([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data", data,
                               "--json", "--rate", "1000000"])
        echo, port = start([sys.executable, "-c", ECHO_SERVER])
        try:
            url = json.loads(line)["gateway_url"]
            issuer = json.loads(line)["issuer"]
            alice, bob = f"alice.{issuer}", f"bobby.{issuer}"
            sender = await connect(url, await login(url, alice), "bench-a")
            receiver = await connect(url, await login(url, bob), "bench-b")

            def send_frame(i: int) -> str:
                return json.dumps({"jsonrpc": "2.0", "id": i, "method": "message.send",
                                   "params": {"to": bob, "payload": payload, "message_id": f"m-{time.perf_counter_ns()}-{i}"}})

            relay = Path(sender, receiver, send_frame).start(
                lambda text: text.startswith('{"jsonrpc":"2.0","method":"event/message.received"'))
            echo_ws = await websockets.connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None)
            baseline = Path(echo_ws, echo_ws, send_frame).start(lambda text: True)
            for path in (relay, baseline):
                await path.latency(200)  # warm up
            gateway_rounds, echo_rounds = [], []
            for _ in range(rounds):
                gateway_rounds.append(await measure(relay, messages, window))
                echo_rounds.append(await measure(baseline, messages, window))
            await relay.close()
            await baseline.close()
            gateway_figures, echo_figures = medians(gateway_rounds), medians(echo_rounds)
        finally:
            for process in (gateway, echo):
                process.terminate()
                process.wait(10)
    return {
        "bench": "gateway_relay", "messages": messages, "window": window, "rounds": rounds, "payload_bytes": len(json.dumps(payload)),
        "gateway": gateway_figures, "echo": echo_figures, **ratios(gateway_figures, echo_figures),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(asyncio.run(main(options.messages, options.window, options.rounds))))
