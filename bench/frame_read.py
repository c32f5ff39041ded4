"""Benchmark: reading one encrypted push frame, the AUN client's strict parser against the gateway
agent's quick read (``aun_runtime.network._frame_guard.quick_read``), in the same run.

The frame is what the gateway pushes for one end-to-end encrypted 100-character text (the envelope
made by the client's own code); the gateway agent reads several such frames per message bridged (the
push, the send's answer, the acknowledgement's). Prints one JSON line: microseconds per frame for
each, and the ratio quick / client.

    python bench/frame_read.py [--frames 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bridge_roundtrip import CryptoFloor  # the same keys and envelope as the bridge's floor

from aun_runtime.network._frame_guard import quick_read


def push_frame() -> str:
    params = {"message_id": "m-1", "from": "sender.bench", "to": "receiver.bench", "seq": 12, "prev_peer_seq": 11,
              "t_server": 1_700_000_000_000, "encrypted": True, "payload": CryptoFloor().envelope()}
    return json.dumps({"jsonrpc": "2.0", "method": "event/message.received", "params": params})


def per_frame_us(read: Callable[[str], Any], frame: str, frames: int) -> float:
    began = time.perf_counter()
    for _ in range(frames):
        read(frame)
    return (time.perf_counter() - began) / frames * 1e6


def main(frames: int, rounds: int) -> dict[str, Any]:
    from aun_core.transport import RPCTransport

    frame = push_frame()
    assert quick_read(frame) == RPCTransport._decode_message(frame)
    client, quick = [], []
    for _ in range(rounds):  # alternating, so both see the same machine
        client.append(per_frame_us(RPCTransport._decode_message, frame, frames))
        quick.append(per_frame_us(quick_read, frame, frames))
    client_us, quick_us = statistics.median(client), statistics.median(quick)
    return {"bench": "frame_read", "frame_chars": len(frame), "frames": frames, "rounds": rounds,
            "client_us_per_frame": round(client_us, 2), "quick_us_per_frame": round(quick_us, 2),
            "ratio_quick_client": round(quick_us / client_us, 3)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    print(json.dumps(main(options.frames, options.rounds)))
