"""``aun-runtime run`` serves what the application set off, as a real process: it prints the
transcript as it grows, stops on Ctrl-C with the counters, and a run that ends by itself says (and
exits 1) when something went wrong."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aun_runtime", "run", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=timeout,
    )


def test_a_scheduled_agent_keeps_speaking_for_the_time_given() -> None:
    done = _run("tests.commands.apps:clock", "--for", "2.5")
    assert done.returncode == 0, done.stderr
    ticks = re.findall(r"clock\.local -> app\.local \[proactive\]: 'tick (\d+)'", done.stdout)
    assert len(ticks) >= 3, done.stdout
    assert ticks == [str(n) for n in range(1, len(ticks) + 1)]
    assert "0 dead letters · 0 loop stops · 0 budget stops" in done.stdout


def test_until_idle_exits_1_and_says_why_when_there_were_dead_letters() -> None:
    done = _run("tests.commands.apps:dead_letter", "--until-idle")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "!! DEAD LETTER at app.local (#1)" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == (
        "run failed: 1 dead letters, 0 loop stops, 0 budget stops (exit 1)"
    )


def test_until_idle_without_failures_exits_0() -> None:
    done = _run("tests.commands.apps:quiet", "--until-idle")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run failed" not in done.stdout


def test_a_serving_run_stops_on_sigint_and_prints_the_counters() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aun_runtime", "run", "tests.commands.apps:clock"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        seen = ""
        while "tick 2" not in seen:  # serving, and the clock speaks
            line = process.stdout.readline()
            assert line, f"the run ended by itself: {seen}"
            seen += line
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "serving; stop with Ctrl-C" in seen
    assert re.search(r"\d+ messages · \d+ delivered .* 0 dead letters", out), out
    assert out.strip().splitlines()[-1] == "stopped"
