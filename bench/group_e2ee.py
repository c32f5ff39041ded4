"""Benchmark: group messages through the local AUN gateway, end-to-end encrypted (the client's
default) against plaintext (``encrypt=False``), in the same run.

One ``aun-runtime gateway`` process (the machine has two cores: one for the gateway, one for the
clients) and real AUN clients (``fastaun``) in this process: one sender and ``--members`` receivers
in one group. For each message the sender's client encrypts once and wraps the key per receiver
device; the gateway checks and stores the envelope and pushes it; each receiver's client decrypts.
Measured from the first send until every receiver has published every message; ``--window``
messages in flight. The two modes alternate over the rounds and each figure is the median, so load
from other processes hits both alike. Prints one JSON line with messages/s per mode and the ratio
encrypted / plaintext.

    python bench/group_e2ee.py [--messages 200] [--members 3] [--window 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


async def _client(gateway: dict[str, Any], data: Path, name: str) -> Any:
    from aun_core import AIDStore, AUNClient
    from aun_core.keystore.local_identity_store import LocalIdentityStore
    from aun_core.logger import NullLogger

    from aun_runtime.network import quiet_client

    aid, home = f"{name}.{gateway['issuer']}", data / name
    LocalIdentityStore(str(home), encryption_seed="bench", logger=NullLogger()).set_metadata_value(
        aid, "gateway_url", gateway["gateway_url"])
    store = AIDStore(home, "bench", root_ca_path=gateway["root_ca_path"], logger=NullLogger())
    await store.register(aid, type="agent")
    client = quiet_client(AUNClient, store.load(aid).data["aid"], "error")
    await client.connect({"auto_reconnect": True})
    return client


async def _round(sender: Any, receivers: list[Any], group_id: str, count: int, window: int, *, encrypt: bool) -> float:
    """Messages per second until every receiver has every one of ``count`` messages."""
    tag = f"{'e' if encrypt else 'p'}{time.monotonic_ns()}"
    remaining = {id(r): count for r in receivers}
    done = asyncio.get_running_loop().create_future()

    def arrived(receiver: Any) -> Any:
        def handler(event: dict[str, Any]) -> None:
            text = str((event.get("payload") or {}).get("text", ""))
            if text.startswith(tag):
                remaining[id(receiver)] -= 1
                if not any(remaining.values()) and not done.done():
                    done.set_result(None)
        return handler

    handlers = [(r, arrived(r)) for r in receivers]
    for receiver, handler in handlers:
        receiver.on("group.message_created", handler)
    params: dict[str, Any] = {} if encrypt else {"encrypt": False}
    started = time.perf_counter()
    slots = asyncio.Semaphore(window)

    async def one(n: int) -> None:
        async with slots:
            await sender.call("group.send", {"group_id": group_id, "payload": {"type": "text", "text": f"{tag}-{n:05d}"},
                                             **params})

    await asyncio.gather(*(one(n) for n in range(count)))
    try:
        await asyncio.wait_for(done, 120)
    except TimeoutError:
        raise TimeoutError(f"{tag}: not every receiver got every message: {sorted(remaining.values())} missing") from None
    elapsed = time.perf_counter() - started
    for receiver, handler in handlers:
        receiver.off("group.message_created", handler)
    return count / elapsed


async def measure(gateway: dict[str, Any], data: Path, messages: int, members: int, window: int,
                  rounds: int) -> dict[str, list[float]]:
    clients: list[Any] = []
    try:
        clients = [await _client(gateway, data, name) for name in ["sender", *(f"member{n:02d}" for n in range(members))]]
        sender, receivers = clients[0], clients[1:]
        group_id = (await sender.call("group.create", {"group_id": "benchgroup"}))["group"]["group_id"]
        for receiver in receivers:
            await sender.call("group.add_member", {"group_id": group_id, "aid": receiver.aid})
        await _round(sender, receivers, group_id, 5, window, encrypt=True)  # warm: keys, bootstrap, state
        await _round(sender, receivers, group_id, 5, window, encrypt=False)
        figures: dict[str, list[float]] = {"encrypted": [], "plaintext": []}
        for _ in range(rounds):
            for mode in ("encrypted", "plaintext"):
                figures[mode].append(await _round(sender, receivers, group_id, messages, window,
                                                  encrypt=mode == "encrypted"))
        return figures
    finally:
        for client in clients:
            await client.close()


def main(messages: int, members: int, window: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        process = subprocess.Popen([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data", f"{tmp}/gw",
                                    "--json", "--rate", "1000000"], stdout=subprocess.PIPE, text=True)
        try:
            assert process.stdout is not None
            gateway = json.loads(process.stdout.readline())
            figures = asyncio.run(measure(gateway, Path(tmp), messages, members, window, rounds))
        finally:
            process.terminate()
            process.wait(10)
    encrypted, plaintext = (statistics.median(figures[m]) for m in ("encrypted", "plaintext"))
    return {"bench": "group_e2ee", "messages": messages, "members": members, "window": window, "rounds": rounds,
            "encrypted_msgs_per_s": round(encrypted, 1), "plaintext_msgs_per_s": round(plaintext, 1),
            "encrypted_over_plaintext": round(encrypted / plaintext, 3)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(main(options.messages, options.members, options.window, options.rounds)))
