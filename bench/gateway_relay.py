"""Benchmark: direct messages A -> local AUN gateway -> B on loopback, against its same-run bounds.

Both servers run in their own process (the machine has two cores: one for the server, one for the
clients), measured in the same run:

- gateway: ``aun-runtime gateway`` (rate limit lifted). A sends ``message.send`` (JSON-RPC, plain
  payload); B receives the ``event/message.received`` push. Every message is committed to SQLite
  before it is pushed.
- gateway_signed: the same, each request carrying the ``client_signature`` the AUN client
  (fastaun) attaches to every ``message.send`` by default (ECDSA P-256 over
  ``method|aid|timestamp|params_hash``), which the gateway verifies before it stores anything.
  The frames are signed before the timed part, so the clients' signing does not share the
  measurement.
- echo: a ``websockets`` server that sends every frame straight back; A sends the same frames and
  receives them itself. It does no parsing, storage or routing: the floor for one WebSocket hop
  out and one back.
- verify_bound: one core verifying the same signatures in a tight loop, with the library and
  call the gateway uses (``cryptography``'s ``EllipticCurvePublicKey.verify``): the bound on a
  verifying relay running on one core.

Latency: one message at a time, from A's send to the arrival (B's push, or A's echo). Throughput: a
window of messages in flight. The paths are measured in alternating rounds and each figure is the
median over the rounds, so load from other processes on a shared machine hits all alike. Prints
one JSON line with messages/s, p50/p99 latency and the ratios gateway / echo and
gateway_signed / verify_bound.

    python bench/gateway_relay.py [--messages 5000] [--window 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import websockets
from cryptography import x509
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


def signed_frame(key: ec.EllipticCurvePrivateKey, aid: str, fingerprint: str, request_id: int,
                 params: dict[str, Any]) -> tuple[str, bytes, bytes]:
    """A ``message.send`` frame signed as the AUN client signs it, and the (signature, data) verified."""
    stamp = str(int(time.time()))
    hashed = hashlib.sha256(json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                            .encode()).hexdigest()
    data = f"message.send|{aid}|{stamp}|{hashed}".encode()
    der = key.sign(data, ec.ECDSA(hashes.SHA256()))
    signature = {"aid": aid, "cert_fingerprint": fingerprint, "timestamp": stamp, "params_hash": hashed,
                 "signature": base64.b64encode(der).decode()}
    frame = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "message.send",
                        "params": {**params, "client_signature": signature}})
    return frame, der, data


def verify_rate(public_key: ec.EllipticCurvePublicKey, signed: list[tuple[bytes, bytes]]) -> float:
    """Signatures per second one core verifies, the gateway's way (each must verify)."""
    began = time.perf_counter()
    for der, data in signed:
        public_key.verify(der, data, ec.ECDSA(hashes.SHA256()))
    return len(signed) / (time.perf_counter() - began)


async def check_verified(ws: Any, receiver: Any, frames: Callable[[int], list[str]]) -> None:
    """Fail unless the gateway accepts a signed frame and refuses it once its signature is spoilt:
    the signed path measured is the verifying one. Reads the one push it causes, so none is left
    for the measurement to count."""
    good = frames(1)[0]
    spoilt = json.loads(good)
    spoilt["params"]["message_id"] += "-altered"  # the params no longer match what was signed
    for frame, wanted in ((good, None), (json.dumps(spoilt), -32003)):
        await ws.send(frame)
        answer = json.loads(await ws.recv())
        code = answer.get("error", {}).get("code")
        if code != wanted:
            raise RuntimeError(f"signed message.send answered {answer}, expected error code {wanted}")
    await receiver.recv()


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


class Login:
    """An AID registered and logged in by hand: its key, certificate fingerprint and access token."""

    def __init__(self, aid: str, key: ec.EllipticCurvePrivateKey, fingerprint: str, token: str) -> None:
        self.aid, self.key, self.fingerprint, self.token = aid, key, fingerprint, token


async def login(url: str, aid: str) -> str:
    """Register ``aid`` and log in by hand; returns an access token."""
    return (await signing_login(url, aid)).token


async def signing_login(url: str, aid: str) -> Login:
    """Register ``aid`` and log in by hand, keeping what signing its requests takes."""
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
        der = x509.load_pem_x509_certificate(cert.encode()).public_bytes(serialization.Encoding.DER)
        return Login(aid, key, "sha256:" + hashlib.sha256(der).hexdigest(), str(phase2["access_token"]))


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

    def __init__(self, sender: Any, receiver: Any, frame: Callable[[int], str]) -> None:
        self.sender, self.receiver, self.frame = sender, receiver, frame
        self.arrived: asyncio.Queue[float] = asyncio.Queue()
        self._readers: list[asyncio.Task[None]] = []

    def start(self, is_arrival: Callable[[Any], bool]) -> Path:
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


class SignedPath(Path):
    """A path whose frames are signed, all of a measurement's before it starts (``sign(count)``),
    so the clients' signing does not share the timed part."""

    def __init__(self, sender: Any, receiver: Any, sign: Callable[[int], list[str]]) -> None:
        super().__init__(sender, receiver, lambda i: self._signed[i])
        self.sign = sign
        self._signed: list[str] = []

    async def latency(self, count: int) -> list[float]:
        self._signed = self.sign(count)
        return await super().latency(count)

    async def throughput(self, count: int, window: int) -> float:
        self._signed = self.sign(count)
        return await super().throughput(count, window)


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
    ids = itertools.count()
    with tempfile.TemporaryDirectory() as data:
        gateway, line = start([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data", data,
                               "--json", "--rate", "1000000"])
        echo, port = start([sys.executable, "-c", ECHO_SERVER])
        try:
            url = json.loads(line)["gateway_url"]
            issuer = json.loads(line)["issuer"]
            alice, bobby, carol = [await signing_login(url, f"{name}.{issuer}") for name in ("alice", "bobby", "carol")]
            sender, receiver = await connect(url, alice.token, "bench-a"), await connect(url, bobby.token, "bench-b")
            signer = await connect(url, carol.token, "bench-c")  # its own connection: its own id space
            verified: list[tuple[bytes, bytes]] = []  # the last signed measurement's (signature, data)

            def params() -> dict[str, Any]:  # what the AUN client sends, need_render included
                return {"to": bobby.aid, "payload": payload, "message_id": f"m-{next(ids)}", "need_render": True}

            def plain_frame(i: int) -> str:
                return json.dumps({"jsonrpc": "2.0", "id": i, "method": "message.send", "params": params()})

            def signed_frames(count: int) -> list[str]:
                signed = [signed_frame(carol.key, carol.aid, carol.fingerprint, i, params()) for i in range(count)]
                verified[:] = [(der, data) for _, der, data in signed]
                return [frame for frame, _, _ in signed]

            await check_verified(signer, receiver, signed_frames)

            def is_push(text: Any) -> bool:
                return str(text).startswith('{"jsonrpc":"2.0","method":"event/message.received"')

            relay = Path(sender, receiver, plain_frame).start(is_push)
            relay_signed = SignedPath(signer, signer, signed_frames).start(lambda text: False)  # reads its answers
            relay_signed.arrived = relay.arrived  # B's pushes, whoever sent them
            echo_ws = await websockets.connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None)
            baseline = Path(echo_ws, echo_ws, plain_frame).start(lambda text: True)
            for path in (relay, relay_signed, baseline):
                await path.latency(200)  # warm up
            figures: dict[str, list[dict[str, float]]] = {"gateway": [], "gateway_signed": [], "echo": []}
            bounds: list[float] = []
            for _ in range(rounds):
                figures["gateway"].append(await measure(relay, messages, window))
                figures["gateway_signed"].append(await measure(relay_signed, messages, window))
                bounds.append(verify_rate(carol.key.public_key(), verified))
                figures["echo"].append(await measure(baseline, messages, window))
            for path in (relay, baseline):
                await path.close()
            await signer.close()
            results = {name: medians(rounds_of) for name, rounds_of in figures.items()}
            verify_bound = statistics.median(bounds)
        finally:
            for process in (gateway, echo):
                process.terminate()
                process.wait(10)
    return {
        "bench": "gateway_relay", "messages": messages, "window": window, "rounds": rounds,
        "payload_bytes": len(json.dumps(payload)), **results, "verify_bound_per_s": round(verify_bound, 1),
        **ratios(results["gateway"], results["echo"]),
        "signed_vs_verify_bound": round(results["gateway_signed"]["msgs_per_s"] / verify_bound, 3),
        "signed_vs_echo": round(results["gateway_signed"]["msgs_per_s"] / results["echo"]["msgs_per_s"], 3),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(asyncio.run(main(options.messages, options.window, options.rounds))))
