"""An archive reused after a killed run: the run's own transcript, `aun-runtime transcript` and the
end counters agree, and what the killed run sent keeps its label."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "aun_runtime", *args]


def test_a_killed_runs_messages_keep_their_label_and_every_count_agrees(tmp_path: Path) -> None:
    archive = str(tmp_path / "run.sqlite")
    killed = subprocess.Popen(
        _command("run", "tests.commands.apps:slow_jobs", "--archive", archive),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "AUN_TEST_DELAY": "60"},  # it is killed while handling the first job
    )
    try:
        assert killed.stdout is not None
        seen = ""
        while "'job 2'" not in seen:
            line = killed.stdout.readline()
            assert line, f"the run ended by itself: {seen}"
            seen += line
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    finally:
        if killed.poll() is None:
            killed.kill()
    again = subprocess.run(
        _command("run", "tests.commands.apps:slow_jobs", "--archive", archive, "--until-idle"),
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    lines = [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in again.stdout.splitlines()]
    # The killed run's jobs were sent by the application's inbox: new conversations, not proactive.
    assert lines[:3] == [f"#{n + 1} app.local -> slow.local [new conversation]: 'job {n}'" for n in range(3)]
    assert "proactive" not in again.stdout
    shown = [line for line in lines if re.match(r"#\d+ ", line)]
    assert len(shown) == 9  # three jobs killed, three jobs and their three answers
    assert "9 messages · 7 delivered · 0 filtered (archived) · 0 dead letters" in again.stdout
    assert "(3 of the messages are from earlier runs on this archive)" in again.stdout
    transcript = subprocess.run(
        _command("transcript", "--archive", archive), capture_output=True, text=True, cwd=ROOT, timeout=60
    ).stdout
    assert len(re.findall(r"^\s*#\d+ ", transcript, re.M)) == 9
    assert "proactive" not in transcript
    assert transcript.count("delivered to slow.local · 1 reply") == 3
