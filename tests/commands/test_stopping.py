"""Every stop is clean, as real processes show: a stuck handler does not hold a signalled process
past its grace, a second signal ends it at once, an application's failure is printed and ends the
run, and an application's teardown runs however the run ends.

The handler under test never returns (``tests.commands.apps:stuck``), so every process here stops with a
turn in flight. Each waits for its own ``ready`` line before it is signalled, and is measured from
the signal to its exit.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from aun_runtime.operating._exit_deadline import SECOND_SIGNAL_GRACE
from aun_runtime.operating._stopping import EXIT_DEADLINE, STOP_GRACE
from tests.distributed.processes import Process, query, start_host, start_worker, wait_until

APPS = "tests.commands.apps"
#: A stop takes the grace and then a moment to close up; a stop still running at the deadline is
#: ended by force, with an exit code that says so.
STOPPED_BY = EXIT_DEADLINE


@pytest.fixture
def procs() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.kill()


def _ready(process: Process, line: str = "handler stuck") -> Process:
    process.wait_for_line(lambda seen: seen.endswith(line))
    return process


def _signal_and_time(process: Process, signum: int) -> tuple[int, float]:
    started = time.monotonic()
    process.proc.send_signal(signum)
    code = process.finish(timeout=30)
    return code, time.monotonic() - started


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stuck_handler_does_not_hold_a_signalled_run(
    signum: signal.Signals, procs: list[Process], tmp_path: Path
) -> None:
    # Every way `run` serves, at once: each stops with the stuck turn in flight.
    gateway = Process(["gateway", "--port", "0", "--data", str(tmp_path / "gateway"), "--json"])
    procs.append(gateway)
    url = json.loads(gateway.wait_for_line(lambda line: line.startswith("{")))["gateway_url"]
    runs = {
        "--until-idle": ["--until-idle"],
        "serving": [],
        "--for": ["--for", "300"],
        "--console": ["--console", "--port", "0"],
        "--gateway-url": ["--gateway-url", url, "--gateway-data", str(tmp_path / "agents")],
    }
    started = {
        name: _ready(Process(["run", f"{APPS}:stuck", "--archive", str(tmp_path / f"{name}.sqlite"), *flags]))
        for name, flags in runs.items()
    }
    procs.extend(started.values())
    signalled = {name: (process.proc.send_signal(signum), time.monotonic())[1] for name, process in started.items()}
    ended = {name: (process.finish(timeout=30), time.monotonic() - signalled[name]) for name, process in started.items()}
    for name, (code, took) in ended.items():
        output = started[name].output
        # A run meant to end by itself was interrupted (128 + N); a serving run ended as it should (0).
        assert code == (128 + signum if name in ("--until-idle", "--for") else 0), output
        assert STOP_GRACE <= took < STOPPED_BY, (name, took)  # the stuck turn had its grace, and no more
        assert f"{signum.name}: stopping; turns in flight get {STOP_GRACE:g} s" in output
        # The stuck message is recorded, in the counters and (as a dead letter) in the transcript.
        assert "the handler of stuck.local still ran after the 5 s grace of the stop: cancelled" in output
        assert "!! DEAD LETTER at stuck.local" in output and "RuntimeStoppedError: the runtime stopped while" in output
        assert " · 1 dead letters · " in output, output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_ends_the_run_at_once(signum: signal.Signals, procs: list[Process]) -> None:
    process = _ready(Process(["run", f"{APPS}:stuck", "--until-idle"]))
    procs.append(process)
    process.proc.send_signal(signum)
    process.wait_for_line(lambda line: "stopping; turns in flight get" in line)
    code, took = _signal_and_time(process, signum)
    assert code == 128 + signum
    assert took < STOP_GRACE  # it did not wait for the grace
    assert f"second {signum.name}: exiting at once" in process.output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_worker_stops_within_the_grace_and_its_stuck_message_is_sent_again(
    signum: signal.Signals, procs: list[Process], tmp_path: Path
) -> None:
    host, address = start_host()
    procs.append(host)
    archive = tmp_path / "worker.sqlite"
    worker = _ready(Process(["worker", "--host", address, "--app", f"{APPS}:stuck", "--archive", str(archive)]))
    procs.append(worker)
    code, took = _signal_and_time(worker, signum)
    assert code == 0, worker.output  # a serving command, stopped cleanly
    assert STOP_GRACE <= took < STOPPED_BY, took
    assert "the handler of stuck.local still ran after the 5 s grace of the stop: cancelled" in worker.output

    # Nothing it had not finished was acknowledged: the same worker, back (and no longer stuck),
    # is sent the message again, and answers it.
    again = Process(
        ["worker", "--host", address, "--app", f"{APPS}:stuck", "--archive", str(archive)],
        env={"STUCK_TRIGGER": "never", "STUCK_SEND": "0"},
    )
    procs.append(again)
    again.wait_for_line(lambda line: " ready on " in line)
    for _ in range(300):
        answered = query(archive, "SELECT body FROM archive WHERE owner='stuck.local' AND kind='sent'")
        if answered:
            break
        time.sleep(0.1)
    assert answered and "answered: hang" in answered[0][0]
    assert again.terminate() == 0


def test_an_app_that_raises_after_starting_a_workbench_is_shown_and_ends_the_run(procs: list[Process]) -> None:
    tag = f"aun-test-{uuid.uuid4().hex}"  # names this test's MCP server among the process's children
    process = Process(["run", f"{APPS}:mcp_then_raise", "--until-idle"], env={"MCP_TAG": tag})
    procs.append(process)
    started = process.wait_for_line(lambda line: line.startswith("tools: "))
    assert "'lookup'" in started  # the MCP server answered
    server = int(started.rsplit(" ", 1)[1])
    process.wait_for_line(lambda line: line.startswith("error: the app raised RuntimeError"))
    failed_at = time.monotonic()
    code = process.finish(timeout=30)
    took = time.monotonic() - failed_at
    output = process.output
    assert code == 1, output
    assert took < STOPPED_BY, took  # the workbench it left open did not hold the process
    assert "Traceback (most recent call last):" in output
    assert 'in mcp_then_raise\n    raise RuntimeError("the app failed after starting its workbench")' in output
    assert "run failed: the app raised (its traceback is above) (exit 1)" in output.splitlines()
    deadline = time.monotonic() + 10  # the server sees its stdin close once the run's process is gone
    while psutil.pid_exists(server) and psutil.Process(server).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the MCP server outlived the run"
        time.sleep(0.1)


def test_a_thread_the_app_left_running_does_not_hold_the_process(procs: list[Process]) -> None:
    process = Process(["run", f"{APPS}:thread_then_raise", "--until-idle"])
    procs.append(process)
    process.wait_for_line(lambda line: line.startswith("error: the app raised RuntimeError"))
    failed_at = time.monotonic()
    assert process.finish(timeout=30) == 1, process.output
    assert time.monotonic() - failed_at < STOPPED_BY
    assert "was still held 3 s after the command ended (threads: app-thread); exiting" in process.output


@pytest.mark.parametrize(
    ("how", "flags", "env", "code"),
    [
        ("a signal", [], {}, 0),
        ("--for", ["--for", "0.5"], {}, 0),
        ("--until-idle", ["--until-idle"], {}, 0),
        ("an error", ["--until-idle"], {"APP_RAISE": "1"}, 1),
    ],
)
def test_an_apps_teardown_runs_however_the_run_ends(
    how: str, flags: list[str], env: dict[str, str], code: int, procs: list[Process], tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    process = Process(["run", f"{APPS}:owned", *flags], env={"APP_MARKER": str(marker), **env})
    procs.append(process)
    if how == "a signal":
        _ready(process, "app ready")
        process.proc.send_signal(signal.SIGTERM)
    assert process.finish(timeout=30) == code, process.output
    # The generator's own cleanup, and what it handed to runtime.on_stop, both ran.
    # (The teardown was handed over after the set-up, so it runs before what the set-up handed over.)
    assert marker.read_text().splitlines() == ["set up", "torn down", "on_stop ran"], process.output
    if how == "an error":
        assert "error: the app raised RuntimeError: the app failed on purpose" in process.output


def test_a_host_stops_on_sigterm_without_tracebacks(procs: list[Process], tmp_path: Path) -> None:
    # Two workers with traffic between them: the host has two data streams open, busy, when signalled.
    host, address = start_host(extra=["--state", str(tmp_path / "host.state")])
    procs.append(host)
    procs.append(start_worker(address, "tests.distributed.apps:sink", tmp_path / "sink.sqlite", env={"TALLY_DELAY": "0.01"}))
    procs.append(start_worker(
        address, "tests.distributed.apps:source", tmp_path / "source.sqlite",
        env={"SOURCE_COUNT": "100000", "SOURCE_BURST": "10", "SOURCE_PAUSE": "0.05"},
    ))
    handled = "SELECT count(*) FROM archive WHERE owner='sink.local' AND kind='received'"
    wait_until(lambda: (query(tmp_path / "sink.sqlite", handled) or [(0,)])[0][0] >= 50, what="traffic")
    code, took = _signal_and_time(host, signal.SIGTERM)
    assert code == 0, host.output  # a serving command, stopped cleanly
    assert took < STOPPED_BY, took
    assert "host: worker" in host.output and "disconnected" in host.output
    assert "Traceback" not in host.output and "CancelledError" not in host.output, host.output


@pytest.mark.parametrize("app", ["backtracking", "summing"])
def test_a_handler_holding_the_interpreter_does_not_hold_a_signalled_run(app: str, procs: list[Process]) -> None:
    # The handler is inside one call of C code that holds the interpreter lock for hours: no other
    # thread runs until it returns, a timer thread included (and while it sums, not even the
    # signal handler). The run is gone at the deadline anyway.
    process = _ready(Process(["run", f"{APPS}:{app}"]))
    procs.append(process)
    time.sleep(0.5)  # well inside the C code by now
    code, took = _signal_and_time_within(process, signal.SIGTERM, EXIT_DEADLINE + 5)
    assert code == -signal.SIGKILL, process.output
    assert took >= EXIT_DEADLINE - 1, took
    output = process.output
    assert f"still running {EXIT_DEADLINE:g} s after SIGTERM: killing it (exit 137)" in output
    # Where it was stuck: the handler's own frame, in every thread's stack.
    assert "most recent call first" in output and 'apps.py", line' in output and "in on_any" in output, output


def test_a_second_signal_ends_a_run_whose_handler_holds_the_interpreter(procs: list[Process]) -> None:
    # The sum never lets the signal handler run: the watchdog, woken by the second signal, ends it.
    process = _ready(Process(["run", f"{APPS}:summing"]))
    procs.append(process)
    time.sleep(0.5)
    process.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    code, took = _signal_and_time_within(process, signal.SIGTERM, SECOND_SIGNAL_GRACE + 5)
    assert code == -signal.SIGKILL, process.output
    assert took < EXIT_DEADLINE - 3, took  # not the first signal's deadline
    assert f"still running {SECOND_SIGNAL_GRACE:g} s after a second SIGTERM: killing it (exit 137)" in process.output


def _signal_and_time_within(process: Process, signum: int, bound: float) -> tuple[int, float]:
    started = time.monotonic()
    process.proc.send_signal(signum)
    try:
        code = process.finish(timeout=bound)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {bound:g} s after {signal.Signals(signum).name}:\n{process.output}")
    return code, time.monotonic() - started


def test_a_commands_watchdog_shows_the_stacks_on_demand_and_goes_with_it(procs: list[Process]) -> None:
    process = _ready(Process(["run", f"{APPS}:quiet"]), "serving; stop with Ctrl-C")
    procs.append(process)
    watchdogs = [child for child in psutil.Process(process.proc.pid).children() if "_exit_deadline.py" in " ".join(child.cmdline())]
    assert len(watchdogs) == 1
    process.proc.send_signal(signal.SIGUSR2)  # where is each thread? The command carries on.
    process.wait_for_line(lambda line: "most recent call first" in line)
    assert process.proc.poll() is None
    assert process.terminate() == 0, process.output
    deadline = time.monotonic() + 10
    while watchdogs[0].is_running() and watchdogs[0].status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the watchdog outlived its command"
        time.sleep(0.05)
