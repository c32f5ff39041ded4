"""Benchmark: agent -> runtime -> gateway agent -> local AUN gateway -> gateway agent -> runtime -> agent,
against the gateway relay alone and a plain WebSocket echo, in the same run.

Four paths carry the same 100-character text, each measured in the same process against the same
gateway process (the machine has two cores: one for the gateway, one for everything else):

- bridge: an agent in runtime A sends to an agent in runtime B. The message is committed to A's
  outbox, leaves through A's AUN client (``fastaun``, end-to-end encrypted by default), is stored by
  the gateway, pulled or pushed to B's client, published to B's agent, archived, committed, and
  only then acknowledged. Measured from the send call to the receiving agent's handler. Also run
  with plaintext direct messages (``--plaintext`` opt-in).
- client: the same AUN client library alone, one client sending (``message.send``, encrypted) and
  one receiving (its ``message.received`` handler): the floor for anything built on that client, and
  so what the runtimes, outbox and archive add is bridge / client.
- relay: what ``bench/gateway_relay.py`` measures: raw JSON-RPC ``message.send`` from A, the push
  arriving at B, no client library, no runtime, no encryption, no acknowledgement.
- echo: a plain ``websockets`` server that sends every frame back: one hop out and one back.
- wire: the least any bridge that keeps the client's cryptography does per message on the same wire,
  with no client library, runtime, outbox or archive: the sender encrypts for the peer's device
  (``encrypt_p2p_message``), signs the request as the client does and writes one ``message.send``
  frame; the receiver parses the push and decrypts it (``decrypt_message``, which verifies the
  sender's signature). No acknowledgement, cursor or pull: an upper bound on a bridge that speaks the
  wire itself for its hot path, both ends in one process as here.
- rules: the bridge with the network taken out: runtime A's send, its outbox commit and lane, then
  the message handed straight to runtime B's link as a page of what has come meanwhile, published
  to B's agent, archived and committed. No client, cryptography, socket or gateway: what the
  runtime's own rules cost per message, so that a ceiling for any bridge that keeps them and speaks
  the wire is the two costs added (one core runs both ends).
- e2ee floor: no network at all, only the client library's own end-to-end encryption of each
  message and its decryption (``encrypt_p2p_message`` and ``decrypt_message``, one recipient device
  with a signed prekey, as the client does for a peer): what any bridge that keeps the client's
  cryptography, with both ends in one process as here, cannot exceed on one core.

Latency: one message at a time. Throughput: a window of messages in flight. Paths alternate over the
rounds and each figure is the median over rounds. Prints one JSON line with messages/s, p50/p99, the
CPU its event loop spent per message (``loop_cpu_ms``), the ratios bridge / client, bridge / relay,
bridge / echo and each path / the floor, and the ceiling of a bridge that keeps the rules and speaks
the wire.

    python bench/bridge_roundtrip.py [--messages 500] [--window 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gateway_relay as relay_bench  # the relay's own measurement, reused as is

from aun_runtime import AUNAgent, AUNMessage, AUNRuntime, MessageContext, event
from aun_runtime.network import GatewayAgent, GatewayAgentConfig

TEXT = "x" * 100


class Sink(AUNAgent):
    """Notes when each message reaches its handler."""

    arrived: ClassVar[asyncio.Queue[float]]

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        Sink.arrived.put_nowait(time.perf_counter())


class _Path:
    """One way from a sender to a receiver's handler; ``arrived`` gets the time of each arrival."""

    arrived: asyncio.Queue[float]

    async def _submit(self) -> None:
        """Hand one message over, returning once the sender may send the next (by default, once sent)."""
        await self._send()

    async def _send(self) -> None:
        """Send one message and wait until the sender has it on its way."""
        raise NotImplementedError

    async def latency(self, count: int) -> list[float]:
        samples = []
        for _ in range(count):
            began = time.perf_counter()
            await self._send()
            samples.append((await self.arrived.get()) - began)
        return samples

    async def throughput(self, count: int, window: int) -> float:
        began = time.perf_counter()
        in_flight = 0
        for _ in range(count):
            if in_flight >= window:
                await self.arrived.get()
                in_flight -= 1
            await self._submit()
            in_flight += 1
        for _ in range(in_flight):
            await self.arrived.get()
        return count / (time.perf_counter() - began)


class CryptoFloor(_Path):
    """Each message encrypted for one peer device and decrypted there, by the client's own code."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        def keys() -> tuple[bytes, bytes]:
            key = ec.generate_private_key(ec.SECP256R1())
            der = key.public_key().public_bytes(serialization.Encoding.DER,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
            return key.private_numbers().private_value.to_bytes(32, "big"), der

        (self.sender_key, self.sender_der), self.peer, self.prekey = keys(), keys(), keys()

    def envelope(self) -> dict[str, Any]:
        """One message as the client encrypts it for a peer's device."""
        from aun_core.v2.e2ee.encrypt_p2p import encrypt_p2p_message

        return encrypt_p2p_message(  # type: ignore[no-any-return]
            {"aid": "sender.bench", "device_id": "a", "ik_priv": self.sender_key, "ik_pub_der": self.sender_der},
            {"targets": [{"aid": "receiver.bench", "device_id": "b", "role": "peer", "key_source": "peer_device_prekey",
                          "ik_pk_der": self.peer[1], "spk_pk_der": self.prekey[1], "spk_id": "spk-1"}]},
            {"type": "text", "text": TEXT})

    def one(self) -> None:
        from aun_core.v2.e2ee.decrypt import decrypt_message

        opened = decrypt_message(self.envelope(), "receiver.bench", "b", self.peer[0], self.prekey[0], self.sender_der)
        assert opened is not None and opened["text"] == TEXT

    async def latency(self, count: int) -> list[float]:
        samples = []
        for _ in range(count):
            began = time.perf_counter()
            self.one()
            samples.append(time.perf_counter() - began)
        return samples

    async def throughput(self, count: int, window: int) -> float:
        began = time.perf_counter()
        for _ in range(count):
            self.one()
        return count / (time.perf_counter() - began)


class WirePath(_Path):
    """What is left of a bridge when it speaks the wire itself: the client's cryptography, a signed
    ``message.send`` frame out, a push parsed and decrypted in."""

    def __init__(self, sender: Any, receiver: Any, signer: Any, to: str, crypto: CryptoFloor) -> None:
        from aun_core.v2.e2ee.decrypt import decrypt_message

        self.sender, self.signer, self.to, self.crypto = sender, signer, to, crypto
        self.arrived = asyncio.Queue()
        self._ids = itertools.count()

        async def take(ws: Any) -> None:
            async for text in ws:
                frame = json.loads(text)
                if frame.get("method") == "event/message.received":
                    opened = decrypt_message(frame["params"]["inline_message"]["legacy_v1"]["payload"], "receiver.bench", "b",
                                             crypto.peer[0], crypto.prekey[0], crypto.sender_der)
                    assert opened is not None and opened["text"] == TEXT
                    self.arrived.put_nowait(time.perf_counter())

        async def answers(ws: Any) -> None:
            async for text in ws:
                if '"error"' in text:
                    raise RuntimeError(f"message.send refused: {text}")

        self.failure: BaseException | None = None
        self._readers = [asyncio.create_task(take(receiver)), asyncio.create_task(answers(sender))]
        for reader in self._readers:
            reader.add_done_callback(self._stopped)

    def _stopped(self, reader: asyncio.Task[None]) -> None:
        """A reader that fails must not leave the measurement waiting for arrivals that never come."""
        if not reader.cancelled() and reader.exception() is not None:
            self.failure = reader.exception()
            self.arrived.put_nowait(float("nan"))

    async def _send(self) -> None:
        if self.failure is not None:
            raise RuntimeError("the wire path stopped") from self.failure
        n = next(self._ids)
        frame, _, _ = relay_bench.signed_frame(self.signer.key, self.signer.aid, self.signer.fingerprint, n, {
            "to": self.to, "payload": self.crypto.envelope(), "message_id": f"w-{n}", "need_render": True})
        await self.sender.send(frame)

    async def close(self) -> None:
        for task in self._readers:
            task.cancel()
        if self.failure is not None:
            raise RuntimeError("the wire path stopped") from self.failure


class BridgePath(_Path):
    """Runtime A's agent -> the network -> runtime B's agent, through two gateway agents."""

    def __init__(self, first: AUNRuntime, sender: str, receiver: str) -> None:
        self.first, self.sender, self.receiver = first, sender, receiver
        self.arrived = Sink.arrived

    async def _send(self) -> None:
        # Returns once committed to the outbox; delivery goes on meanwhile.
        await self.first.send(self.receiver, TEXT, sender=self.sender)


class Loopback:
    """Stands in for the network between two links: what one sends reaches the other's page
    handler, a page of all that came while the page before it was being handled."""

    def __init__(self, sender: Any, receiver: Any) -> None:
        self.sender, self.receiver = sender, receiver
        self.waiting: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._seqs = itertools.count(1)
        self.failure: BaseException | None = None
        self._pages = asyncio.create_task(self._hand_over())
        self._pages.add_done_callback(self._stopped)
        self._network = sender.client.call
        sender.client.call = self.call  # this benchmark's own sender's messages, nothing else

    async def call(self, method: str, params: dict[str, Any], **options: Any) -> Any:
        if method != "message.send":
            return await self._network(method, params, **options)
        seq = next(self._seqs)
        self.waiting.put_nowait({"event": "message.received", "payload": {
            "message_id": params["message_id"], "from": self.sender.aid, "seq": seq, "payload": params["payload"]}})
        return {"seq": seq}

    async def _hand_over(self) -> None:
        while True:
            items = [await self.waiting.get()]
            while not self.waiting.empty():
                items.append(self.waiting.get_nowait())
            await self.receiver._take_page({"items": items}, group=False)

    def _stopped(self, pages: asyncio.Task[None]) -> None:
        """A page that fails must not leave the measurement waiting for arrivals that never come."""
        if not pages.cancelled() and pages.exception() is not None:
            self.failure = pages.exception()
            Sink.arrived.put_nowait(float("nan"))

    async def close(self) -> None:
        self._pages.cancel()
        if self.failure is not None:
            raise RuntimeError("the loopback stopped") from self.failure


class ClientPath(_Path):
    """Two AUN clients and nothing else: ``message.send`` from one, its handler on the other."""

    def __init__(self, sender: Any, receiver: Any) -> None:
        self.sender, self.receiver = sender, receiver
        self.arrived = asyncio.Queue()
        receiver.on("message.received", lambda _: self.arrived.put_nowait(time.perf_counter()))
        self._calls: set[asyncio.Task[Any]] = set()

    def _call(self) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(self.sender.call("message.send", {"to": self.receiver.aid, "payload": {"type": "text", "text": TEXT}}))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)
        return task

    async def _send(self) -> None:
        await self._call()

    async def _submit(self) -> None:
        self._call()  # the client pipelines its calls: the window alone bounds what is in flight


async def clients(gateway: dict[str, Any], data: Path) -> tuple[ClientPath, list[Any]]:
    from aun_core import AIDStore, AUNClient
    from aun_core.keystore.local_identity_store import LocalIdentityStore
    from aun_core.logger import NullLogger

    from aun_runtime.network import quiet_client

    made = []
    for name in ("clienta", "clientb"):
        aid, home = f"{name}.{gateway['issuer']}", data / name
        LocalIdentityStore(str(home), encryption_seed="bench", logger=NullLogger()).set_metadata_value(aid, "gateway_url", gateway["gateway_url"])
        store = AIDStore(home, "bench", root_ca_path=gateway["root_ca_path"], logger=NullLogger())
        await store.register(aid, type="agent")
        client = quiet_client(AUNClient, store.load(aid).data["aid"], "error")  # type: ignore[index]
        await client.connect({"auto_reconnect": True})
        made.append(client)
    return ClientPath(made[0], made[1]), made


async def bridge(gateway: dict[str, Any], data: Path, name: str, *, encrypt: bool) -> tuple[BridgePath, list[Any]]:
    issuer = gateway["issuer"]
    sender, receiver = f"{name}-a.{issuer}", f"{name}-b.{issuer}"
    started: list[Any] = []
    runtimes = []
    for aid, cls in ((sender, AUNAgent), (receiver, Sink)):
        runtime = AUNRuntime(archive=data / f"{aid}.sqlite", domain=issuer)
        await runtime.start()
        if cls is Sink:
            await runtime.register_agent(aid, Sink)
        else:
            await runtime.open_inbox(aid)
        config = GatewayAgentConfig(data_dir=data / aid, gateway_url=gateway["gateway_url"],
                                    root_ca_path=gateway["root_ca_path"], encrypt=encrypt, reconnect_max_delay=1.0)
        agent = GatewayAgent(runtime, config)
        await agent.start()
        await agent.wait_connected()
        started += [agent, runtime]
        runtimes.append(runtime)
    return BridgePath(runtimes[0], sender, receiver), started


async def rules(gateway: dict[str, Any], data: Path) -> tuple[BridgePath, Loopback, list[Any]]:
    """A bridge whose sending link hands each message to the receiving link instead of the network."""
    path, started = await bridge(gateway, data, "rules", encrypt=False)
    links = [link for agent in started if isinstance(agent, GatewayAgent) for link in agent._links.values()]
    return path, Loopback(*links), started


async def main(messages: int, window: int, rounds: int) -> dict[str, Any]:
    logging.getLogger("aun_runtime").setLevel(logging.ERROR)
    Sink.arrived = asyncio.Queue()
    payload = {"type": "text", "text": TEXT}
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch)
        gateway, line = relay_bench.start([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data",
                                           str(data / "gateway"), "--json", "--rate", "1000000"])
        echo, port = relay_bench.start([sys.executable, "-c", relay_bench.ECHO_SERVER])
        started: list[Any] = []
        try:
            info = json.loads(line)
            url, issuer = info["gateway_url"], info["issuer"]
            alice, bob = f"alice.{issuer}", f"bobby.{issuer}"
            sender = await relay_bench.connect(url, await relay_bench.login(url, alice), "bench-a")
            receiver = await relay_bench.connect(url, await relay_bench.login(url, bob), "bench-b")

            def send_frame(i: int) -> str:
                return json.dumps({"jsonrpc": "2.0", "id": i, "method": "message.send",
                                   "params": {"to": bob, "payload": payload, "message_id": f"m-{time.perf_counter_ns()}-{i}"}})

            walter = await relay_bench.signing_login(url, f"walter.{issuer}")
            wendy = f"wendy.{issuer}"
            wire = WirePath(await relay_bench.connect(url, walter.token, "wire-a"),
                            await relay_bench.connect(url, await relay_bench.login(url, wendy), "wire-b"),
                            walter, wendy, CryptoFloor())
            relay = relay_bench.Path(sender, receiver, send_frame).start(
                lambda text: text.startswith('{"jsonrpc":"2.0","method":"event/message.received"'))
            echo_ws = await websockets.connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None)
            baseline = relay_bench.Path(echo_ws, echo_ws, send_frame).start(lambda text: True)
            encrypted, opened = await bridge(info, data, "sealed", encrypt=True)
            plaintext, opened_plain = await bridge(info, data, "plain", encrypt=False)
            library, library_clients = await clients(info, data)
            alone, loopback, opened_rules = await rules(info, data)
            started = opened + opened_plain + opened_rules
            paths: dict[str, Any] = {"bridge": encrypted, "bridge_plaintext": plaintext, "client": library,
                                     "relay": relay, "echo": baseline, "wire": wire, "rules": alone,
                                     "e2ee_floor": CryptoFloor()}
            for path in paths.values():
                await path.latency(100)  # warm up (the first encrypted message also fetches the peer's keys)
            figures: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
            for _ in range(rounds):
                for name, path in paths.items():
                    samples = await path.latency(max(100, messages // 5))
                    cpu = time.thread_time()  # this loop's thread: where every path's own work runs
                    rate = await path.throughput(messages, window)
                    loop_ms = (time.thread_time() - cpu) * 1000 / messages
                    figures[name].append({**relay_bench.summary(samples, rate), "loop_cpu_ms": loop_ms})
            await relay.close()
            await wire.close()
            await loopback.close()
            await baseline.close()
            for client in library_clients:
                await client.close()
        finally:
            for item in started:
                await item.stop()
            for process in (gateway, echo):
                process.terminate()
                process.wait(10)
    result = {name: relay_bench.medians(rounds_) for name, rounds_ in figures.items()}

    def ratio(a: str, b: str, key: str) -> float:
        return round(result[a][key] / result[b][key], 3)

    return {
        "bench": "bridge_roundtrip", "messages": messages, "window": window, "rounds": rounds, "text_chars": len(TEXT),
        **result,
        "throughput_ratio_bridge_client": ratio("bridge", "client", "msgs_per_s"),
        "p50_ratio_bridge_client": ratio("bridge", "client", "p50_ms"),
        "throughput_ratio_bridge_relay": ratio("bridge", "relay", "msgs_per_s"),
        "throughput_ratio_bridge_echo": ratio("bridge", "echo", "msgs_per_s"),
        "throughput_ratio_plaintext_relay": ratio("bridge_plaintext", "relay", "msgs_per_s"),
        "p50_ratio_bridge_relay": ratio("bridge", "relay", "p50_ms"),
        "p99_ratio_bridge_relay": ratio("bridge", "relay", "p99_ms"),
        "p50_ratio_bridge_echo": ratio("bridge", "echo", "p50_ms"),
        "throughput_ratio_floor_relay": ratio("e2ee_floor", "relay", "msgs_per_s"),
        "throughput_ratio_bridge_floor": ratio("bridge", "e2ee_floor", "msgs_per_s"),
        # The ceiling of a bridge that speaks the wire itself and keeps the client's cryptography.
        "throughput_ratio_wire_floor": ratio("wire", "e2ee_floor", "msgs_per_s"),
        "throughput_ratio_bridge_wire": ratio("bridge", "wire", "msgs_per_s"),
        # The runtime's own rules with no network, and the ceiling of a bridge that keeps them and
        # speaks the wire: the loop's CPU per message of the two added, against the floor's (the
        # loop's thread is what each is bound by; what runs beside it is taken as free).
        "throughput_ratio_rules_floor": ratio("rules", "e2ee_floor", "msgs_per_s"),
        "throughput_ratio_ceiling_floor": round(
            result["e2ee_floor"]["loop_cpu_ms"] / (result["wire"]["loop_cpu_ms"] + result["rules"]["loop_cpu_ms"]), 3),
        # The ceiling of anything that sends and receives through the client's own message path.
        "throughput_ratio_client_floor": ratio("client", "e2ee_floor", "msgs_per_s"),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(asyncio.run(main(options.messages, options.window, options.rounds))))
