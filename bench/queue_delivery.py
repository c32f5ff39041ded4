"""Benchmark: direct messages to an AID served by two queue members, against one fanout connection.

One ``aun-runtime gateway`` process (rate limit lifted), measured in the same run:

- fanout: A sends ``message.send`` to B, whose one connection declares the default ``fanout``
  delivery mode; an arrival is B's ``event/message.received`` push. Today's path.
- queue: A sends to C, whose two connections are queue members (``round_robin``); an arrival is the
  push on whichever member the message was assigned to. On top of the fanout path the gateway
  records the assignment in the same commit and works out the member's own ``prev_peer_seq``.

Latency: one message at a time, from A's send to the arrival. Throughput: a window of messages in
flight. The two are measured in alternating rounds and each figure is the median over the rounds, so
load from other processes hits both alike. Prints one JSON line with messages/s, p50/p99 latency,
how the queue's messages split over its members, and the ratios queue / fanout.

    python bench/queue_delivery.py [--messages 5000] [--window 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from typing import Any

from gateway_relay import Path, connect, login, measure, medians, ratios, start

PUSH = '{"jsonrpc":"2.0","method":"event/message.received"'


class QueuePath(Path):
    """A path whose arrivals come on either of two member connections, counted per member."""

    def __init__(self, sender: Any, members: list[Any], frame: Any) -> None:
        super().__init__(sender, members[0], frame)
        self.members = members
        self.counts = [0] * len(members)

    def start(self, is_arrival: Any) -> QueuePath:
        async def read(ws: Any, index: int | None) -> None:
            async for text in ws:
                if is_arrival(text):
                    if index is not None:
                        self.counts[index] += 1
                    self.arrived.put_nowait(time.perf_counter())

        self._readers.append(asyncio.create_task(read(self.sender, None)))
        for index, ws in enumerate(self.members):
            self._readers.append(asyncio.create_task(read(ws, index)))
        return self

    async def close(self) -> None:
        for task in self._readers:
            task.cancel()
        for ws in [self.sender, *self.members]:
            await ws.close()


async def main(messages: int, window: int, rounds: int) -> dict[str, Any]:
    payload = {"type": "text", "text": "x" * 100}
    with tempfile.TemporaryDirectory() as data:
        gateway, line = start([sys.executable, "-m", "aun_runtime.gateway", "--port", "0", "--data", data,
                               "--json", "--rate", "1000000"])
        try:
            url, issuer = json.loads(line)["gateway_url"], json.loads(line)["issuer"]
            alice, bob, carol = f"alice.{issuer}", f"bobby.{issuer}", f"carol.{issuer}"
            fanout_mode, queue_mode = {"mode": "fanout"}, {"mode": "queue", "routing": "round_robin"}
            alice_token, bob_token, carol_token = [await login(url, aid) for aid in (alice, bob, carol)]
            # One sender connection per path, so each reader sees only its own path's answers.
            to_bob = await connect(url, alice_token, "bench-a1", fanout_mode)
            to_carol = await connect(url, alice_token, "bench-a2", fanout_mode)
            bob_ws = await connect(url, bob_token, "bench-b", fanout_mode)
            members = [await connect(url, carol_token, f"bench-c{i}", queue_mode) for i in (1, 2)]

            def frame_to(receiver: str) -> Any:
                def frame(i: int) -> str:
                    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "message.send", "params": {
                        "to": receiver, "payload": payload, "message_id": f"m-{time.perf_counter_ns()}-{i}"}})
                return frame

            fanout = Path(to_bob, bob_ws, frame_to(bob)).start(lambda text: text.startswith(PUSH))
            queue = QueuePath(to_carol, members, frame_to(carol)).start(lambda text: text.startswith(PUSH))
            for path in (fanout, queue):
                await path.latency(200)  # warm up
            fanout_rounds, queue_rounds = [], []
            for _ in range(rounds):
                fanout_rounds.append(await measure(fanout, messages, window))
                queue_rounds.append(await measure(queue, messages, window))
            split = list(queue.counts)
            await fanout.close()
            await queue.close()
            fanout_figures, queue_figures = medians(fanout_rounds), medians(queue_rounds)
        finally:
            gateway.terminate()
            gateway.wait(10)
    return {
        "bench": "queue_delivery", "messages": messages, "window": window, "rounds": rounds,
        "fanout": fanout_figures, "queue": queue_figures, "queue_split": split,
        **ratios(queue_figures, fanout_figures),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(asyncio.run(main(options.messages, options.window, options.rounds))))
