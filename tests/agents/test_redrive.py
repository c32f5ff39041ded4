"""The model down longer than the retry policy: retryable dead letters; the model back: each redriven once.

`aun-runtime dead-letters list|retry|drop` runs as a real process on the archive file the first
runtime wrote; the model is a real OpenAI-compatible server on loopback. One agent had already sent
the first part of its answer before its model went down: after the redrive it has said each part
exactly once.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import aiohttp

from aun_runtime import (
    Archive,
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    MessageContext,
    RecordKind,
    TransientError,
    event,
)
from aun_runtime.console import Console
from tests.agents.redrive_app import AGENTS, app
from tests.models.model_shapes import asker
from tests.models.openai_stand_in import OpenAIStandIn, Reply, ToolCalls, openai_stand_in


class Model:
    """bot0 answers "part one" and looks something up, then "part two"; the others answer at once.
    While `down`, every request fails (500) but bot0's first round."""

    def __init__(self) -> None:
        self.down = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply | ToolCalls:
        who = asker(body)
        second_round = any(m["role"] == "tool" for m in body["messages"])
        if who == "bot0.local" and not second_round:
            return ToolCalls([("reply", {"text": "part one"}), ("lookup", {"query": "x"})])
        if self.down.is_set():
            return Reply(status=500)
        return ToolCalls([("reply", {"text": "part two" if who == "bot0.local" else f"answer from {who}"})])


def environment(stand_in: OpenAIStandIn) -> dict[str, str]:
    return {"AUN_MODEL": "stand-in", "AUN_MODEL_BASE_URL": stand_in.base_url, "AUN_MODEL_API_KEY": "sk-local",
            "AUN_MODEL_PATIENCE": "0.5", "AUN_MODEL_BACKOFF": "0.1"}


async def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "aun_runtime", "dead-letters", *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )


def said(archive: Archive) -> list[str]:
    return sorted(r.message.text or "" for r in archive.records(kinds=[RecordKind.RECEIVED])
                  if r.owner == "alice.local" and r.message is not None)


async def test_dead_letters_of_a_long_outage_are_redriven_once_and_send_nothing_twice(
    tmp_path: Path, monkeypatch: Any
) -> None:
    path = str(tmp_path / "archive.sqlite")
    model = Model()
    model.down.set()
    with openai_stand_in(model) as stand_in:
        env = environment(stand_in)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        runtime = AUNRuntime(archive=path)
        await app(runtime)
        await runtime.start()
        human = await runtime.open_inbox("alice.local")
        for aid in AGENTS:
            await human.send(aid, f"{aid}, how are things?")
        await asyncio.wait_for(runtime.settle(), timeout=60)
        await runtime.close()

        listed = await cli("list", "--archive", path, env=env)
        assert listed.returncode == 0, listed.stderr
        assert "3 open dead letters" in listed.stdout
        assert listed.stdout.count("retryable: ModelUnavailableError") == 3

        model.down.clear()  # the model is back
        retried = await cli("retry", "--archive", path, "--app", "tests.agents.redrive_app:app", env=env)
        assert retried.returncode == 0, retried.stdout + retried.stderr
        assert "3 dead letters redriven, 0 new" in retried.stdout

        again = await cli("retry", "--archive", path, "--app", "tests.agents.redrive_app:app", env=env)
        assert "0 dead letters redriven, 0 new" in again.stdout, again.stdout + again.stderr

    archive = Archive(path, read_only=True)
    assert said(archive) == ["answer from bot1.local", "answer from bot2.local", "part one", "part two"]
    archive.close()
    after = await cli("list", "--archive", path, env={})
    assert "0 open dead letters" in after.stdout


async def test_dead_letters_are_filtered_and_dropped(tmp_path: Path, monkeypatch: Any) -> None:
    path = str(tmp_path / "archive.sqlite")
    model = Model()
    model.down.set()
    with openai_stand_in(model) as stand_in:
        for name, value in environment(stand_in).items():
            monkeypatch.setenv(name, value)
        runtime = AUNRuntime(archive=path)
        await app(runtime)
        await runtime.start()
        for aid in AGENTS[1:]:
            await (await runtime.open_inbox("alice.local")).send(aid, "hello?")
        await asyncio.wait_for(runtime.settle(), timeout=60)
        await runtime.close()
    one = await cli("list", "--archive", path, "--aid", "bot1.local", env={})
    assert "1 open dead letter\n" in one.stdout and "bot2.local" not in one.stdout
    none = await cli("list", "--archive", path, "--cause", "HandlerTimeoutError", env={})
    assert "0 open dead letters" in none.stdout
    future = await cli("list", "--archive", path, "--since", "2999-01-01", env={})
    assert "0 open dead letters" in future.stdout
    dropped = await cli("drop", "--archive", path, "--aid", "bot1.local", env={})
    assert "1 dead letter dropped" in dropped.stdout
    left = await cli("list", "--archive", path, env={})
    assert "1 open dead letter\n" in left.stdout and "bot2.local" in left.stdout
    bad = await cli("list", "--archive", path, "--since", "yesterday", env={})
    assert bad.returncode == 2 and "neither an ISO 8601 time" in bad.stderr


class Flaky(AUNAgent):
    """Fails every turn for a passing cause, or answers, as `failing` says."""

    failing = True
    turn_retry = None

    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        if Flaky.failing:
            raise TransientError("the service behind me is down")
        await self.reply("fine now")


async def test_redrive_works_on_a_postgresql_archive(postgres_url: str) -> None:
    runtime = AUNRuntime(archive=postgres_url)
    await runtime.register_agent("flaky.local", Flaky)
    human = await runtime.open_inbox("alice.local")
    await runtime.start()
    Flaky.failing = True
    await human.send("flaky.local", "one")
    await human.send("flaky.local", "two")
    await asyncio.wait_for(runtime.settle(), timeout=30)
    listed = await cli("list", "--archive", postgres_url, env={})
    assert "2 open dead letters" in listed.stdout, listed.stdout + listed.stderr
    dropped = await cli("drop", "--archive", postgres_url, "--cause", "down", "--since", "1h", env={})
    assert "2 dead letters dropped" in dropped.stdout
    assert await runtime.redrive() == []  # dropped ones are not redriven
    Flaky.failing = True
    await human.send("flaky.local", "three")
    await asyncio.wait_for(runtime.settle(), timeout=30)
    Flaky.failing = False
    [redriven] = await runtime.redrive(aid="flaky.local")
    assert redriven.message is not None and redriven.message.text == "three"
    await asyncio.wait_for(runtime.settle(), timeout=30)
    assert [m.text for m in human.received] == ["fine now"]
    await runtime.close()


async def test_the_console_redrives_one_dead_letter_and_only_when_it_may_send() -> None:
    runtime = AUNRuntime()
    await runtime.register_agent("flaky.local", Flaky)
    human = await runtime.open_inbox("alice.local")
    await runtime.start()
    Flaky.failing = True
    await human.send("flaky.local", "one")
    await human.send("flaky.local", "two")
    await asyncio.wait_for(runtime.settle(), timeout=30)
    first, second = runtime.archive.dead_letters()
    Flaky.failing = False
    async with (
        Console(runtime, port=0) as read_only,
        aiohttp.ClientSession() as http,
        http.post(read_only.url + "api/redrive", json={"record_id": first.id}) as refused,
    ):
        assert refused.status == 403
    async with Console(runtime, port=0, allow_send=True) as console, aiohttp.ClientSession() as http:
        async with http.post(console.url + "api/redrive", json={"record_id": "one"}) as bad:
            assert bad.status == 400 and (await bad.json())["error"]["field"] == "record_id"
        async with http.post(console.url + "api/redrive", json={"record_id": first.id}) as done:
            assert (await done.json()) == {"redriven": [first.id]}
        await asyncio.wait_for(runtime.settle(), timeout=30)
    assert [m.text for m in human.received] == ["fine now"]
    assert [r.id for r in await runtime.redrive(aid="nobody.local")] == []
    assert [r.id for r in await runtime.redrive()] == [second.id]
    await runtime.close()
