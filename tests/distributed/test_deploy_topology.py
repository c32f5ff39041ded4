"""The compose file's topology run as plain processes (images cannot be built here): its host, its
two workers and its console, each configured by the environment the file gives it (addresses and
the database replaced by the test's own). The workers start first, before their host: every process
becomes ready, and the team's exchange is in the shared archive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from .processes import ROOT, Process, wait_until
from .test_operating_cli import free_port, get, probes_url

COMPOSE = ROOT / "deploy" / "compose.yaml"


def test_the_compose_topology_runs_as_processes(procs: list[Process], tmp_path: Path, postgres_url: str) -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    host_address = f"127.0.0.1:{free_port()}"

    def ours(name: str) -> dict[str, str]:
        env = {key: str(value) for key, value in services[name]["environment"].items()}
        for key, value in env.items():
            value = value.replace("postgresql://aun:aun@postgres:5432/aun", postgres_url)
            value = value.replace("host:50051", host_address).replace("0.0.0.0:50051", host_address)
            env[key] = value.replace("/data/", f"{tmp_path}/")
        env["PYTHONPATH"] = f"{ROOT / 'deploy' / 'app'}:{ROOT}"
        env["AUN_HTTP"] = "127.0.0.1:0"  # the image's :9090, on a port of the test's own
        return env

    started: dict[str, tuple[Process, str]] = {}
    for name in ("worker-review", "worker-coder", "host"):
        assert services[name]["command"] in (["worker"], ["host"])
        process = Process(services[name]["command"], env=ours(name))
        procs.append(process)
        started[name] = process, probes_url(process)
    console_env = ours("console") | {"AUN_HOST": "127.0.0.1", "AUN_PORT": "0"}
    console = Process(services["console"]["command"], env=console_env)
    procs.append(console)
    console_url = console.wait_for_line(lambda s: s.startswith("console: http")).split()[1].rstrip("/")
    for name, (_, url) in started.items():
        wait_until(lambda url=url: get(f"{url}/readyz")[0] == 200, timeout=90, what=f"{name} ready")
    assert get(f"{console_url}/readyz")[0] == 200 and get(f"{console_url}/healthz")[0] == 200

    def exchanged() -> bool:
        done = subprocess.run([sys.executable, "-m", "aun_runtime", "transcript", "--archive", postgres_url],
                              capture_output=True, text=True, cwd=ROOT, timeout=60)
        return done.returncode == 0 and all(aid in done.stdout for aid in ("coder.local", "executor.local", "reviewer.local"))

    wait_until(exchanged, timeout=120, what="the team's exchange in the shared archive")
