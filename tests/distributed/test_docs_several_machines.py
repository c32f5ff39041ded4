"""The worked example of docs/several-machines.md, run as written: its app file, its three shells
(host, two workers on one PostgreSQL database) and its transcript command, with the page's addresses
replaced by the test's own (a host on loopback, the test's PostgreSQL server)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from .processes import ROOT, Process, wait_until

PAGE = ROOT / "docs" / "several-machines.md"
SECTION = re.compile(r"^## A worked example.*?(?=^## )", re.MULTILINE | re.DOTALL)
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
PAGE_HOST, PAGE_DATABASE = "10.0.0.5:50051", "postgresql://aun@10.0.0.9:5432/aun"


def _commands(shell: str) -> list[list[str]]:
    """The commands of a shell block: continuation lines joined, comments dropped."""
    joined = shell.replace("\\\n", " ")
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def test_the_worked_example_runs_as_written(procs: list[Process], tmp_path: Path, postgres_url: str) -> None:
    section = SECTION.search(PAGE.read_text(encoding="utf-8"))
    assert section is not None
    blocks = BLOCK.findall(section.group(0))
    [app] = [text for kind, text in blocks if kind == "python"]
    shells, views = [text for kind, text in blocks if kind == "sh"]
    (tmp_path / "team.py").write_text(app)

    def ours(arg: str) -> str:
        return arg.replace(PAGE_DATABASE, postgres_url).replace(PAGE_HOST, "127.0.0.1:0").replace("host.state", str(tmp_path / "host.state"))

    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}"}
    host_command, *worker_commands = _commands(shells)
    assert host_command[:2] == ["aun-runtime", "host"] and len(worker_commands) == 2
    host = Process([ours(a) for a in host_command[1:]], env=env)
    procs.append(host)
    address = host.wait_for_line(lambda s: s.startswith("aun-runtime host ready on ")).split(" ready on ")[1].split()[0]
    for command in worker_commands:
        worker = Process([ours(a).replace("127.0.0.1:0", address) for a in command[1:]], env=env)
        procs.append(worker)
        worker.wait_for_line(lambda s: s.startswith("aun-runtime worker ") and " ready on " in s)

    once = [ours(a) for a in _commands(views)[0][1:]]
    assert once[:1] == ["transcript"]
    said: list[str] = []

    def reviewed() -> bool:
        done = subprocess.run([sys.executable, "-m", "aun_runtime", *once], capture_output=True, text=True, cwd=ROOT, timeout=60)
        said[:] = [done.stdout + done.stderr]
        return done.returncode == 0 and all(f"{aid}" in done.stdout for aid in ("coder.local", "executor.local", "reviewer.local"))

    try:
        wait_until(reviewed, timeout=120, what="the team's exchange in the shared archive")
    except TimeoutError:
        raise AssertionError(said[0] + "\n".join(p.output for p in procs)) from None
    assert "from outside" not in said[0]  # both workers' sides of every message are in the one archive
