"""docs/human-in-the-loop.md, as a reader runs it: its `desk.py` in a real process fed through
standard input, and the same app behind the console, answered through the page's send."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "human-in-the-loop.md").read_text(encoding="utf-8")
SCRIPT = re.search(r"^```python\n(.*?)^```$", PAGE, re.M | re.S)
TYPED = re.search(r"^Run it with .*?^```text\n(.*?)^```$", PAGE, re.M | re.S)
PRINTS = re.search(r"^It prints:\n\n```text\n(.*?)^```$", PAGE, re.M | re.S)
COMMAND = "aun-runtime run desk:app --console --allow-send"
TIMEOUT = 60.0


@pytest.fixture
def desk(tmp_path: Path) -> Path:
    assert SCRIPT is not None
    (tmp_path / "desk.py").write_text(SCRIPT.group(1), encoding="utf-8")
    return tmp_path


def _env(where: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)]), "PYTHONUNBUFFERED": "1"}


def test_the_terminal_example_prints_what_the_page_shows_for_what_was_typed(desk: Path) -> None:
    assert TYPED is not None and PRINTS is not None
    run = subprocess.run(
        [sys.executable, "desk.py"], input=TYPED.group(1), capture_output=True, text=True,
        cwd=desk, env=_env(desk), timeout=TIMEOUT,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == PRINTS.group(1)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def _messages(base: str) -> list[dict[str, Any]]:
    return [r["message"] for r in _get(f"{base}/api/records?after=0")["records"] if r["kind"] == "sent"]


def _wait_for(base: str, text: str) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for message in _messages(base):
            if message["payload"].get("text") == text:
                return message
        time.sleep(0.1)
    raise AssertionError(f"no message {text!r} in {_messages(base)}")


@pytest.fixture
def console(desk: Path) -> Iterator[str]:
    assert COMMAND in PAGE
    args = [*COMMAND.split()[1:], "--port", "0", "--archive", str(desk / "desk.sqlite")]
    process = subprocess.Popen(
        [sys.executable, "-m", "aun_runtime", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=desk, env=_env(desk),
    )
    try:
        assert process.stdout is not None
        seen = ""
        while (found := re.search(r"^console: (http://\S+)", seen, re.M)) is None:
            line = process.stdout.readline()
            assert line, f"the command ended: {seen}"
            seen += line
        yield found.group(1).rstrip("/")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()


def test_behind_the_console_the_person_answers_from_the_page(console: str) -> None:
    assert _get(f"{console}/api/info")["read_only"] is False
    question = _wait_for(console, "Book the 9:00 train to Lyon on Friday?")
    assert question["to"] == "person.local"
    _post(f"{console}/api/send", {"from": "person.local", "to": "planner.local", "text": "yes please",
                                  "in_reply_to": question["message_id"]})
    booked = _wait_for(console, "Booked.")
    posted = _wait_for(console, "The 9:00 train to Lyon is booked for Friday.")
    assert booked["to"] == "person.local" and posted["group_id"] == "trip"
