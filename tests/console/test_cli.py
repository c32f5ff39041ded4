"""The console on the command line, as real processes: the demo with and without it, and on a file."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp

from .conftest import TIMEOUT, next_event

URL = re.compile(rb"console: (http://127\.0\.0\.1:\d+/)")


async def _start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aun_runtime",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _read_until_url(process: asyncio.subprocess.Process) -> tuple[str, bytes]:
    assert process.stdout is not None
    seen = b""
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line, f"the process ended without printing a console URL: {seen.decode()}"
        seen += line
        found = URL.search(line)
        if found:
            return found.group(1).decode(), seen


async def test_plain_demo_still_exits_by_itself() -> None:
    process = await _start("demo")
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    assert b"Good morning, lobby!" in out
    assert b"console" not in out


async def test_demo_with_console_serves_the_scenario_until_interrupted() -> None:
    process = await _start("demo", "--console", "--port", "0")
    try:
        url, _ = await _read_until_url(process)
        _, transcript = await _read_until_url(
            process
        )  # printed again after the scenario, with the transcript
        assert b"Good morning, lobby!" in transcript and b"serving until Ctrl-C" in transcript
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as http:
            async with http.get(url + "api/records?after=0") as response:
                records = (await response.json())["records"]
            texts = {r["message"]["payload"].get("text") for r in records if r["kind"] == "sent"}
            assert "Good morning, lobby! twice, are you up?" in texts
            assert "Lunch at noon, for whoever reads this." in texts
            body = {"from": "app.local", "to": "twice.local", "text": "hello"}
            async with http.post(url + "api/send", json=body) as response:
                assert response.status == 403  # read-only unless --allow-send
        process.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
        assert process.returncode == 0, err.decode()
        assert b"console stopped" in out
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_demo_console_with_allow_send_sends_as_an_agent() -> None:
    process = await _start("demo", "--console", "--allow-send", "--port", "0")
    try:
        url, _ = await _read_until_url(process)
        await _read_until_url(process)  # the scenario has settled
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as http:
            async with http.get(url + "api/info") as response:
                head = (await response.json())["head"]
            async with http.get(url + f"api/events?after={head}") as stream:
                body = {"from": "quiet.local", "to": "twice.local", "text": "from the page"}
                async with http.post(url + "api/send", json=body) as response:
                    assert response.status == 201, await response.text()
                    sent = (await response.json())["message"]
                # twice.local answers it twice, like any message: the runtime kept running for the page.
                replies: list[dict[str, Any]] = []
                while len(replies) < 2:
                    event = await asyncio.wait_for(
                        next_event(stream, skip=("hello", "agents", "status")), TIMEOUT
                    )
                    replies += [
                        r["message"]
                        for r in event.json()
                        if r["kind"] == "sent" and r["message"].get("in_reply_to") == sent["message_id"]
                    ]
            assert [m["from_aid"] for m in replies] == ["twice.local", "twice.local"]
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), TIMEOUT)
        assert process.returncode == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_console_command_watches_a_file_and_refuses_to_send(tmp_path: Path) -> None:
    refused = await _start("console", "--archive", str(tmp_path / "a.sqlite"), "--allow-send")
    _, err = await asyncio.wait_for(refused.communicate(), 60)
    assert refused.returncode != 0
    assert b"--allow-send needs the runtime in this process" in err

    process = await _start("console", "--archive", str(tmp_path / "a.sqlite"), "--port", "0")
    try:
        url, line = await _read_until_url(process)
        assert b"read-only" in line
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as http,
            http.get(url + "api/info") as response,
        ):
            assert (await response.json())["state"] == "waiting"  # no runtime has written it yet
        process.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(process.communicate(), TIMEOUT)
        assert process.returncode == 0 and b"console stopped" in out
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_run_with_console_prints_the_transcript_as_it_grows_as_run_does() -> None:
    process = await _start("run", "agents.demo:app", "--console", "--port", "0")
    try:
        _, seen = await _read_until_url(process)
        _, seen_after = await _read_until_url(process)  # the console's line again, once the app has settled
        live = re.search(rb"^\d\d:\d\d:\d\d #1 herald\.local -> #lobby \[proactive\]", seen + seen_after, re.MULTILINE)
        assert live, (seen + seen_after).decode()
        assert b" messages \xc2\xb7 " in seen_after  # the counters once it has settled
        assert (seen + seen_after).count(b"Lunch at noon, for whoever") == 1  # each message once, as it came
        process.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
        assert process.returncode == 0, err.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_run_json_without_a_gateway_says_why_it_would_be_silent() -> None:
    import os
    import subprocess

    done = subprocess.run([sys.executable, "-m", "aun_runtime", "run", "agents.demo:app", "--json"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "AUN_GATEWAY_URL": ""})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --json prints the gateway agent's lifecycle events as JSON lines, so it needs --gateway-url "
        "(or AUN_GATEWAY_URL); without a gateway, run prints its transcript"
    ]
