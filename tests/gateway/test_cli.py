"""``aun-runtime gateway`` as a user (or a supervisor) runs it: a real subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from .conftest import RawConnection


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aun_runtime", "gateway", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )


async def test_gateway_subprocess_prints_how_to_connect_and_stops_on_sigterm(tmp_path: Path) -> None:
    process = _start("--port", "0", "--data", str(tmp_path / "gw"), "--json")
    try:
        assert process.stdout is not None
        info = json.loads(process.stdout.readline())
        assert info["gateway_url"].startswith("ws://127.0.0.1:") and info["gateway_url"].endswith("/aun")
        assert info["issuer"] == "aun.localhost"
        root_pem = Path(info["root_ca_path"]).read_bytes()  # noqa: ASYNC240 - a few bytes, once
        assert root_pem.startswith(b"-----BEGIN CERTIFICATE-----")
        async with aiohttp.ClientSession() as session, session.get(f"{info['http_url']}/health") as response:
            assert (await response.json())["status"] == "ok"

        class _Server:  # what RawConnection needs of a server
            url = info["gateway_url"]

        conn = await RawConnection.open(_Server())  # type: ignore[arg-type]
        assert conn.challenge["params"]["issuer"] == "aun.localhost"
        await conn.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_human_output_and_start_errors(tmp_path: Path) -> None:
    process = _start("--port", "0", "--data", str(tmp_path / "gw"), "--issuer", "lab.test")
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(5)]
        assert lines[0].strip() == "AUN gateway running"
        assert "lab.test" in lines[2] and "root.pem" in lines[3]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    clash = _start("--port", "0", "--data", str(tmp_path / "gw"), "--issuer", "other.test")
    _, stderr = clash.communicate(timeout=20)
    assert clash.returncode == 2 and "lab.test" in stderr
