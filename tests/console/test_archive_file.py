"""A console on an archive file that another process writes: read-only, live, and patient."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from aun_runtime import AUNRuntime
from aun_runtime.console import Console

from .conftest import TIMEOUT, next_event

OpenConsole = Callable[..., Awaitable[Console]]

# A runtime in its own process: it sends each line it reads to an agent that answers twice.
WRITER = """
import asyncio, sys
from aun_runtime import AUNRuntime
from aun_runtime.testing import Replier

async def main(path):
    runtime = AUNRuntime(archive=path)
    await runtime.start()
    await runtime.register_agent("twice.local", lambda: Replier(times=2), description="answers twice")
    inbox = await runtime.open_inbox("app.local")
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        await inbox.send("twice.local", line.strip())
        await runtime.settle()
        print("settled", flush=True)
    await runtime.close()

asyncio.run(main(sys.argv[1]))
"""


async def _say(writer: asyncio.subprocess.Process, text: str) -> None:
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdin.write(f"{text}\n".encode())
    await writer.stdin.drain()
    assert await asyncio.wait_for(writer.stdout.readline(), TIMEOUT) == b"settled\n"


async def _texts_until(stream: aiohttp.ClientResponse, wanted: set[str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    while wanted - {r["message"]["payload"]["text"] for r in records if r["message"]}:
        event = await asyncio.wait_for(next_event(stream, skip=("hello", "agents", "status")), TIMEOUT)
        records += event.json()
    return records


async def test_console_follows_another_processes_archive_read_only(
    tmp_path: Path, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    path = tmp_path / "live.sqlite"
    console = await open_console(path)
    async with http.get(console.url + "api/info") as response:
        info = await response.json()
    assert info["state"] == "waiting" and info["read_only"] is True
    assert not path.exists()  # looking for the file did not create it

    writer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, str(path), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        await _say(writer, "hello")
        async with http.get(console.url + "api/events?after=0") as stream:
            records = await _texts_until(
                stream, {"hello", "answer 1 of 2 to: hello", "answer 2 of 2 to: hello"}
            )
            last = max(r["id"] for r in records)
            await _say(writer, "again")
            newer = await _texts_until(stream, {"again", "answer 2 of 2 to: again"})
            assert all(r["id"] > last for r in newer)  # only what is new, never the archive again
        async with http.get(console.url + "api/agents") as response:
            agents = {a["aid"]: (a["role"], a["description"]) for a in await response.json()}
        assert agents == {
            "twice.local": ("agent", "answers twice"),
            "app.local": ("inbox", "application inbox"),
        }
        async with http.get(console.url + "api/info") as response:
            assert (await response.json())["state"] == "live"
        # Sending needs the runtime in this process: the page of a file console cannot send.
        body = {"from": "app.local", "to": "twice.local", "text": "from the page"}
        async with http.post(console.url + "api/send", json=body) as response:
            assert response.status == 403
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        assert await asyncio.wait_for(writer.wait(), TIMEOUT) == 0


async def test_console_reports_when_the_runtime_closes_its_archive(
    open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    runtime = AUNRuntime()
    await runtime.start()
    console = await open_console(runtime)
    async with http.get(console.url + "api/events?after=0") as stream:
        await runtime.close()
        while True:
            event = await asyncio.wait_for(next_event(stream), TIMEOUT)
            if event.event == "status" and event.json()["state"] == "closed":
                break
    async with http.get(console.url + "api/records?after=0") as response:
        assert (await response.json())["records"] == []  # answers, rather than failing on a closed file


async def test_a_file_that_is_no_archive_is_reported_not_fatal(
    tmp_path: Path, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_text("these are not the records you are looking for\n" * 200)
    console = await open_console(path)
    async with http.get(console.url + "api/info") as response:
        info = await response.json()
    assert info["state"] == "error"
    assert "cannot be read as an archive" in info["detail"]
    async with http.get(console.url + "api/records?after=0") as response:
        assert response.status == 200
        assert (await response.json())["records"] == []
