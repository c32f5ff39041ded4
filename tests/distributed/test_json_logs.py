"""`--log-format json` (here by `AUN_LOG_FORMAT`): every line a worker writes on stderr, from start
to its stop on SIGTERM, is one JSON object with time, level, logger and message; a line logged in a
turn names the AID, the thread and the message; Python's warnings are lines like the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from .processes import DIE_WITH_PARENT, ROOT, Process, start_host, wait_until


def test_every_line_of_a_workers_run_is_json(procs: list[Process], tmp_path: Path) -> None:
    host, address = start_host()
    procs.append(host)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "always", "AUN_LOG_FORMAT": "json",
           "AUN_HOST": address, "AUN_APP": "tests.distributed.operating_apps:logging_team",
           "AUN_ARCHIVE": str(tmp_path / "w.sqlite")}
    worker = subprocess.Popen([*DIE_WITH_PARENT, sys.executable, "-m", "aun_runtime", "-v", "worker"], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(worker.stderr or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("handling first" in line for line in said), timeout=60, what="the agent's turn")
        worker.terminate()
        worker.wait(timeout=30)
        reader.join(timeout=30)
    finally:
        worker.kill()
    lines = [json.loads(line) for line in said]  # every line parses
    assert len(lines) >= 4
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    assert all(line["time"].endswith("Z") and line["time"][10] == "T" for line in lines)
    [turn] = [line for line in lines if line["logger"] == "team"]
    assert turn["aid"] == "logs.local" and turn["message"] == "handling first"
    assert turn["message_id"] and turn["thread_id"]
    assert any(line["logger"] == "py.warnings" and "deprecated" in line["message"] for line in lines)
    assert any("SIGTERM" in line["message"] for line in lines)  # how it stopped, as JSON too
