"""Host and worker processes for tests: started with the real CLI, ready by handshake, always killed.

A process is ready when it prints its ``ready`` line (the host picks a free port with ``:0`` and
says which); nothing here sleeps for a fixed time. Every child dies with the test process
(``PR_SET_PDEATHSIG``) even if pytest itself is killed, and fixtures kill them in teardown.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 30.0


# The child is made to die with the test process by `setpriv`, run first, rather than by a
# `preexec_fn`: a `preexec_fn` makes subprocess fork (not vfork) and run Python in the child, and a
# fork runs gRPC's fork handlers in this process, which has gRPC's poller threads running (a test's
# own gRPC client); that once crashed a test process. Without one, nothing runs between fork and exec.
# The death signal survives the exec of `ip netns exec` and of the runtime itself.
DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "KILL", "--")


class Process:
    """One ``aun-runtime`` child process whose output lines are collected as they come.

    ``prefix`` runs it through another command first: ``Namespace.command([])`` runs it inside a
    network namespace (``ip netns exec`` becomes the process itself, so killing it kills the runtime).
    """

    def __init__(self, args: Sequence[str], env: dict[str, str] | None = None, prefix: Sequence[str] = ()) -> None:
        self.args = list(args)
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen(
            [*DIE_WITH_PARENT, *prefix, sys.executable, "-m", "aun_runtime", *self.args],
            cwd=ROOT,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, predicate: Callable[[str], bool], timeout: float = READY_TIMEOUT) -> str:
        """The first line (from now on or already seen) that satisfies ``predicate``."""
        for line in list(self.lines):
            if predicate(line):
                return line
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.args[0]}: no matching line in {timeout} s; output:\n" + self.output)
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"{self.args[0]} exited ({self.proc.wait()}); output:\n" + self.output)
            if predicate(line):
                return line

    def finish(self, timeout: float = READY_TIMEOUT) -> int:
        """Wait for the process to exit and for all of its output to be read; its exit code."""
        code = self.proc.wait(timeout=timeout)
        deadline = time.monotonic() + timeout
        while (line := self._queue.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            del line  # already kept in self.lines by the reader
        return code

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout=timeout)


def start_host(address: str = "127.0.0.1:0", extra: Sequence[str] = (), prefix: Sequence[str] = ()) -> tuple[Process, str]:
    host = Process(["host", "--address", address, *extra], prefix=prefix)
    line = host.wait_for_line(lambda s: s.startswith("aun-runtime host ready on "))
    return host, line.split(" ready on ", 1)[1].split()[0]


def start_worker(
    host: str,
    app: str,
    archive: Path | str,
    env: dict[str, str] | None = None,
    extra: Sequence[str] = (),
    prefix: Sequence[str] = (),
) -> Process:
    worker = Process(["worker", "--host", host, "--app", app, "--archive", str(archive), *extra], env=env, prefix=prefix)
    worker.wait_for_line(lambda s: s.startswith("aun-runtime worker ") and " ready on " in s)
    return worker


def start_standby_hosts(
    machines: dict[str, Any], url: str, port: int, procs: list[Process]
) -> tuple[dict[str, Process], str]:
    """Two hosts on the shared state at `url`, in the namespaces `machines["h1"]` and `["h2"]`: h1
    first, so that it serves and h2 stands by. Their processes (also added to `procs`), and both
    addresses as a worker's `--host` takes them."""
    addresses = {label: f"{machines[label].address}:{port}" for label in ("h1", "h2")}
    hosts = {}
    for label, says in (("h1", "aun-runtime host ready on"), ("h2", "standing by")):
        hosts[label] = Process(["host", "--address", addresses[label], "--state", url], prefix=machines[label].command([]))
        procs.append(hosts[label])
        hosts[label].wait_for_line(lambda line, says=says: says in line)
    return hosts, f"{addresses['h1']},{addresses['h2']}"


def query(archive: Path | str, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Read a worker's archive while it runs (WAL lets a reader in beside the writer)."""
    db = sqlite3.connect(f"file:{archive}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:
        return []  # not created yet
    finally:
        db.close()


def received_texts(archive: Path | str, owner: str = "source.local") -> list[str]:
    """The texts `owner` received, in the order its SQLite archive holds them (a sender's replies)."""
    rows = query(archive, "SELECT json_extract(body, '$.payload.text') FROM archive WHERE owner = ? AND kind = 'received'"
                 " ORDER BY id", (owner,))  # fmt: skip
    return [str(text) for (text,) in rows]


def shared_received_texts(server: Any, owner: str = "svc.local") -> list[str]:
    """The texts `owner`'s `received` records hold in the shared PostgreSQL archive of `server` (a
    `PostgresServer`), in order: one per handling, whichever instance handled it."""
    out = server.sql(
        f"SELECT body::json->'payload'->>'text' FROM archive WHERE owner = '{owner}' AND kind = 'received' ORDER BY id"
    )
    return [str(text) for text in out.split()]


def wait_until(check: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``check`` until it holds; the poll interval is short and the wait ends on success."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)
