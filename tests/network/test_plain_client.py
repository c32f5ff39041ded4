"""A plain AUN client (the ``fastaun`` library, no aun-runtime code) and the reflection team served
by an ``aun-runtime run`` process: it gets zero, one or several messages back, as the agents decide."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from aun_runtime import RecordKind

from .conftest import Children, PlainClient, eventually, read_archive


async def test_a_plain_client_gives_the_reflection_team_a_task_and_gets_what_the_team_decides(
    tmp_path: Path, children: Children, plain_clients: Callable[..., Awaitable[PlainClient]]
) -> None:
    _, gateway, _ = await children.gateway(tmp_path / "gateway")
    issuer = gateway.issuer
    team = children.runtime("team", gateway, {}, app_spec="agents.network:team", extra=("--console", "--port", "0"))
    coder, reviewer, twice, quiet = (f"{name}.{issuer}" for name in ("coder", "reviewer", "twice", "quiet"))
    await team.connected(coder, f"executor.{issuer}", reviewer, twice, quiet)
    user = await plain_clients(gateway, "user")

    # A task, as any AUN program writes one: a json payload of the reflection contract's kind.
    task = {"type": "json", "kind": "aun.reflection.CodingTask",
            "data": {"task": "Print the first 10 Fibonacci numbers, space-separated.", "task_id": "fib"}}
    sent = await user.send(coder, task)
    outcome = await user.next(timeout=60)
    assert outcome["from"] == reviewer and outcome["encrypted"] is True  # end-to-end encrypted by default
    payload = outcome["payload"]
    assert payload["kind"] == "aun.reflection.CodingResult"
    assert payload["data"]["status"] == "approved" and payload["data"]["rounds"] == 2
    assert payload["data"]["stdout"].strip() == "0 1 1 2 3 5 8 13 21 34"  # the code really ran
    assert payload["reply_to"] == {"message_id": payload["reply_to"]["message_id"]}
    assert payload["thread_id"] == sent["message_id"]  # the whole team's work is one thread

    # Two answers from the agent that answers twice; none from the one that keeps silent, nor from
    # the Coder, who takes tasks, not chat.
    await user.send(twice, {"type": "text", "text": "Can you hear me?"})
    answers = await user.take(2)
    assert [(a["from"], a["payload"]["text"]) for a in answers] == [
        (twice, "I heard: Can you hear me?"), (twice, "…and one more thing: replies are acts, not return values.")]
    await user.send(quiet, {"type": "text", "text": "Anyone home?"})
    await user.send(coder, {"type": "text", "text": "hello coder"})

    archive = read_archive(children.archive("team"))

    def received(owner: str) -> list[str]:
        return [r.message.text or "" for r in archive.history(owner, kinds=[RecordKind.RECEIVED]) if r.message]

    await eventually(lambda: "Anyone home?" in received(quiet) and "hello coder" in received(coder), what="the silent ones")
    # Delivered and archived: silence is an answer, not a loss.
    assert archive.history(quiet, kinds=[RecordKind.SENT]) == []
    assert [r.message.to for r in archive.history(coder, kinds=[RecordKind.SENT]) if r.message] == [f"executor.{issuer}"] * 2
    first = next(r.message for r in archive.history(coder, kinds=[RecordKind.RECEIVED]) if r.message)
    assert (first.from_aid, first.message_id, first.seq) == (user.aid, sent["message_id"], sent["seq"])
    assert archive.dead_letters() == []
    archive.close()
    # The console beside the served runtime shows the traffic from the network too.
    console = await team.wait_for(lambda line: line.get("event") == "console")
    async with aiohttp.ClientSession() as session, session.get(f"{console['url'].rstrip('/')}/api/records?limit=500") as response:
        assert response.status == 200
        assert sent["message_id"] in await response.text()
    assert user.direct.empty()  # and nothing more came
    assert team.terminate() == 0
