"""`scripts/import_map.py` draws the map docs/where-things-live.md describes: rooms on floors, no circle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_map_has_the_rooms_on_their_floors_and_no_circle() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_map.py"), "--json"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    found = json.loads(out)
    floors = {room: info["floor"] for room, info in found["rooms"].items()}
    assert found["circles"] == [] and found["modules in circles"] == []
    # The order docs/where-things-live.md gives, each room above those it uses.
    order = ["protocols", "aun_runtime.base", "aun_runtime.storage", "aun_runtime.delivery", "aun_runtime.core",
             "aun_runtime.api", "aun_runtime.operating", "aun_runtime.distributed", "aun_runtime.commands", "aun_runtime"]
    assert [floors[room] for room in order] == sorted(floors[room] for room in order)
    assert len({floors[room] for room in order}) == len(order)
