"""The console's HTTP API: incremental reads, the event stream, refusals, and where it listens."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from aun_runtime import AUNRuntime, Budgets, ModelBudgetExceeded
from aun_runtime.console import Console
from aun_runtime.console._feed import encode_agents
from aun_runtime.storage._archive import AgentEntry
from aun_runtime.testing import Bouncer, Recorder, Replier, Stuck

from .conftest import TIMEOUT, next_event

OpenConsole = Callable[..., Awaitable[Console]]


async def _records(http: aiohttp.ClientSession, console: Console, **query: Any) -> dict[str, Any]:
    async with http.get(
        console.url + "api/records", params={k: str(v) for k, v in query.items()}
    ) as response:
        assert response.status == 200, await response.text()
        body: dict[str, Any] = await response.json()
        return body


async def test_records_are_fetched_incrementally_by_archive_id(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    await runtime.register_agent("twice.local", lambda: Replier(times=2))
    inbox = await runtime.open_inbox("app.local")
    console = await open_console(runtime)
    await inbox.send("twice.local", "first")
    await runtime.settle()

    everything = await _records(http, console, after=0)
    ids = [r["id"] for r in everything["records"]]
    assert ids == sorted(ids) and len(ids) == runtime.archive.count()
    assert everything["last_id"] == ids[-1] and everything["more"] is False
    texts = [r["message"]["payload"]["text"] for r in everything["records"] if r["kind"] == "sent"]
    assert texts == ["first", "answer 1 of 2 to: first", "answer 2 of 2 to: first"]

    await inbox.send("twice.local", "second")
    await runtime.settle()
    newer = await _records(http, console, after=everything["last_id"])
    assert [r["id"] for r in newer["records"]] == [r.id for r in runtime.archive.records_after(ids[-1])]
    assert all(r["id"] > ids[-1] for r in newer["records"])  # nothing already fetched comes back
    assert {r["message"]["payload"]["text"] for r in newer["records"] if r["kind"] == "sent"} == {
        "second",
        "answer 1 of 2 to: second",
        "answer 2 of 2 to: second",
    }

    # Small pages walk the whole archive in order, each record once.
    walked, cursor = [], 0
    while True:
        page = await _records(http, console, after=cursor, limit=4)
        walked += [r["id"] for r in page["records"]]
        cursor = page["last_id"]
        if not page["more"]:
            break
    assert walked == [r.id for r in runtime.archive.records_after(0, limit=10_000)]


async def test_event_stream_sends_only_records_newer_than_the_cursor(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    await runtime.register_agent("rec.local", Recorder)
    inbox = await runtime.open_inbox("app.local")
    console = await open_console(runtime)
    await inbox.send("rec.local", "before the page")
    await runtime.settle()
    head = runtime.archive.last_id()

    async with http.get(console.url + f"api/events?after={head}") as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        hello = (await next_event(stream)).json()
        assert hello["start"] == head and hello["read_only"] is True
        await inbox.send("rec.local", "while the page is open")
        await runtime.settle()
        event = await asyncio.wait_for(next_event(stream, skip=("agents", "status")), TIMEOUT)
        assert event.event == "records"
        records = event.json()
        assert records and all(r["id"] > head for r in records)
        assert {r["message"]["payload"]["text"] for r in records} == {"while the page is open"}
        assert event.id == str(records[-1]["id"])  # the SSE id is the cursor
        last = records[-1]["id"]

    # A reconnect (the browser sends Last-Event-ID) resumes exactly after what the page had.
    await inbox.send("rec.local", "while the page was away")
    await runtime.settle()
    async with http.get(console.url + "api/events", headers={"Last-Event-ID": str(last)}) as stream:
        assert (await next_event(stream)).json()["start"] == last
        event = await asyncio.wait_for(next_event(stream, skip=("agents", "status")), TIMEOUT)
        assert {r["message"]["payload"]["text"] for r in event.json()} == {"while the page was away"}
        assert all(r["id"] > last for r in event.json())


async def test_budget_stops_are_in_the_feed_with_their_reason_and_message(
    open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    runtime = AUNRuntime(budgets=Budgets(thread_messages=3))
    await runtime.start()
    try:
        await runtime.register_agent("ping.local", Bouncer)
        await runtime.register_agent("pong.local", Bouncer)
        console = await open_console(runtime)
        await runtime.send("pong.local", "ping", sender="ping.local")
        await runtime.settle()
        # A model call refused outside any message (a proactive action) has no message to carry.
        runtime.record_budget_stop("solo.local", ModelBudgetExceeded("solo.local made 8 model calls"))
        await runtime.settle()

        records = (await _records(http, console, after=0))["records"]
    finally:
        await runtime.close()
    sent = [r["message"] for r in records if r["kind"] == "sent"]
    assert [m["payload"]["text"] for m in sent] == ["ping", "re: ping", "re: re: ping"]
    refused, loose = [r for r in records if r["kind"] == "budget_stop"]
    # The refused send: its owner's own message, answering the last one the thread could hold.
    assert refused["owner"] == "pong.local" and "thread_messages=3" in refused["reason"]
    assert refused["message"]["from_aid"] == "pong.local"
    assert refused["message"]["in_reply_to"] == sent[-1]["message_id"]
    assert refused["message"]["payload"]["text"] == "re: re: re: ping"
    assert loose["owner"] == "solo.local" and loose["message"] is None
    assert loose["reason"] == loose["text"] == "solo.local made 8 model calls"


async def test_a_stuck_turn_cut_off_is_in_the_feed_as_a_dead_letter_saying_so(
    open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    runtime = AUNRuntime(handler_timeout=0.2)
    await runtime.start()
    try:
        await runtime.register_agent("stuck.local", Stuck)
        inbox = await runtime.open_inbox("app.local")
        console = await open_console(runtime)
        stuck = await inbox.send("stuck.local", "hang")
        await runtime.settle()
        records = (await _records(http, console, after=0))["records"]
    finally:
        await runtime.close()
    [dead] = [r for r in records if r["kind"] == "dead_letter"]
    assert dead["owner"] == "stuck.local" and dead["message"]["message_id"] == stuck.message_id
    assert dead["reason"].startswith("HandlerTimeoutError: the handler of stuck.local ran 0.")
    assert "past its handler_timeout of 0.2 s" in dead["reason"]


async def test_a_fresh_page_starts_with_the_newest_backlog(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    await runtime.register_agent("rec.local", Recorder)
    inbox = await runtime.open_inbox("app.local")
    for n in range(5):
        await inbox.send("rec.local", f"#{n}")
    await runtime.settle()
    console = await open_console(runtime, backlog=3)
    head = runtime.archive.last_id()
    async with http.get(console.url + "api/events") as stream:
        hello = (await next_event(stream)).json()
        assert hello["start"] == head - 3
        event = await asyncio.wait_for(next_event(stream, skip=("agents", "status")), TIMEOUT)
        assert [r["id"] for r in event.json()] == [head - 2, head - 1, head]


async def test_a_read_only_console_refuses_to_send_and_changes_nothing(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    await runtime.register_agent("rec.local", Recorder)
    await runtime.open_inbox("app.local")
    console = await open_console(runtime)
    before = runtime.archive.count()
    body = {"from": "app.local", "to": "rec.local", "text": "let me in"}
    async with http.post(console.url + "api/send", json=body) as response:
        assert response.status == 403
        error = (await response.json())["error"]
        assert error["code"] == "read_only" and "allow_send" in error["message"]
    await runtime.settle()
    assert runtime.archive.count() == before
    assert (await runtime.agent_instance("rec.local", Recorder)).received == []


async def test_an_enabled_console_sends_through_the_agents_send_tools(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    await runtime.register_agent("alice.local", Recorder)
    await runtime.register_agent("bob.local", Recorder)
    await runtime.create_group("pair", ["alice.local", "bob.local"], dispatch_mode="mention")
    console = await open_console(runtime, allow_send=True)

    async with http.post(
        console.url + "api/send", json={"from": "alice.local", "to": "bob.local", "text": "hi bob"}
    ) as response:
        assert response.status == 201, await response.text()
        sent = (await response.json())["message"]
    async with http.post(
        console.url + "api/send",
        json={
            "from": "alice.local",
            "group_id": "pair",
            "text": "@bob",
            "mentions": ["bob.local"],
            "in_reply_to": sent["message_id"],
        },
    ) as response:
        assert response.status == 201, await response.text()
    await runtime.settle()
    bob = await runtime.agent_instance("bob.local", Recorder)
    assert [(m.from_aid, m.text) for m in bob.received] == [
        ("alice.local", "hi bob"),
        ("alice.local", "@bob"),
    ]
    assert bob.received[1].in_reply_to == sent["message_id"]
    owners = {
        (r.owner, r.kind) for r in runtime.archive.records() if r.message and r.message.text == "hi bob"
    }
    assert owners == {("alice.local", "sent"), ("bob.local", "received")}


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"from": "ghost.local", "to": "bob.local", "text": "x"}, 404, "UnknownAIDError", None),
        ({"from": "alice.local", "to": "nobody.local", "text": "x"}, 404, "UnknownAIDError", None),
        ({"from": "alice.local", "group_id": "nogroup", "text": "x"}, 404, "UnknownGroupError", None),
        ({"from": "alice.local", "group_id": "others", "text": "x"}, 409, "NotAGroupMemberError", None),
        ({"from": "alice.local", "to": "Bob", "text": "x"}, 400, "InvalidAIDError", None),
        (
            {"from": "alice.local", "to": "bob.local", "group_id": "others", "text": "x"},
            400,
            "invalid_request",
            "to",
        ),
        ({"from": "alice.local", "to": "bob.local"}, 400, "invalid_request", "text"),
        ({"to": "bob.local", "text": "x"}, 400, "invalid_request", "from"),
        (
            {"from": "alice.local", "to": "bob.local", "text": "x", "mentions": ["bob.local"]},
            400,
            "invalid_request",
            "mentions",
        ),
        (
            {
                "from": "alice.local",
                "to": "bob.local",
                "payload": {"type": "tool_result", "call_id": "c", "ok": False},
            },
            400,
            "InvalidMessageError",
            "payload.tool_result",
        ),
        (["not", "an", "object"], 400, "invalid_request", None),
    ],
)
async def test_bad_send_requests_get_a_specific_error(
    runtime: AUNRuntime,
    open_console: OpenConsole,
    http: aiohttp.ClientSession,
    body: Any,
    status: int,
    code: str,
    field: str | None,
) -> None:
    await runtime.register_agent("alice.local", Recorder)
    await runtime.register_agent("bob.local", Recorder)
    await runtime.create_group("others", ["bob.local"])
    console = await open_console(runtime, allow_send=True)
    async with http.post(console.url + "api/send", json=body) as response:
        assert response.status == status
        error = (await response.json())["error"]
    assert error["code"] == code
    assert error["field"] == field
    await runtime.settle()
    assert (await runtime.agent_instance("bob.local", Recorder)).received == []


async def test_sends_must_be_json_from_the_consoles_own_page(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    await runtime.register_agent("bob.local", Recorder)
    await runtime.open_inbox("app.local")
    console = await open_console(runtime, allow_send=True)
    url = console.url + "api/send"
    body = '{"from": "app.local", "to": "bob.local", "text": "x"}'
    # A cross-site form can post text/plain without a preflight: refused.
    async with http.post(url, data=body, headers={"Content-Type": "text/plain"}) as response:
        assert response.status == 415
        assert (await response.json())["error"]["code"] == "unsupported_media_type"
    async with http.post(
        url, data=body, headers={"Content-Type": "application/json", "Origin": "http://evil.example"}
    ) as response:
        assert response.status == 403
        assert (await response.json())["error"]["code"] == "cross_origin"
    async with http.post(url, data="{not json", headers={"Content-Type": "application/json"}) as response:
        assert response.status == 400
        assert (await response.json())["error"]["code"] == "invalid_request"
    await runtime.settle()
    assert (await runtime.agent_instance("bob.local", Recorder)).received == []


async def test_the_console_listens_on_loopback_by_default_and_only_answers_to_its_names(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    assert Console(runtime).host == "127.0.0.1"
    console = await open_console(runtime)
    host, port = console.address
    assert host == "127.0.0.1"
    assert console.url == f"http://127.0.0.1:{port}/"
    async with http.get(console.url + "api/info", headers={"Host": f"localhost:{port}"}) as response:
        assert response.status == 200
    # A page elsewhere whose name resolves to 127.0.0.1 (DNS rebinding) gets nothing.
    async with http.get(console.url + "api/records", headers={"Host": f"evil.example:{port}"}) as response:
        assert response.status == 403
        assert (await response.json())["error"]["code"] == "forbidden_host"


@pytest.mark.parametrize(
    ("query", "field"),
    [("after=abc", "after"), ("after=-1", "after"), ("limit=0", "limit"), ("limit=100000", "limit")],
)
async def test_bad_query_parameters_are_named(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession, query: str, field: str
) -> None:
    console = await open_console(runtime)
    async with http.get(console.url + "api/records?" + query) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert (error["code"], error["field"]) == ("invalid_parameter", field)


async def test_page_and_assets_are_served_with_a_strict_policy(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    console = await open_console(runtime)
    async with http.get(console.url) as response:
        assert response.status == 200
        assert response.content_type == "text/html"
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]
        page = await response.text()
    assert 'src="static/console.js"' in page
    modules = ("console.js", "dom.js", "model.js", "message.js", "views.js", "composer.js")
    for name, kind in [*((m, "text/javascript") for m in modules), ("console.css", "text/css")]:
        async with http.get(console.url + "static/" + name) as response:
            assert (response.status, response.content_type) == (200, kind)
    for name in ("missing.js", "..%2F_console.py"):
        async with http.get(console.url + "static/" + name) as response:
            assert response.status == 404


async def test_agents_are_listed_with_role_mode_and_description(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    await runtime.register_agent("rec.local", Recorder, description="keeps everything")
    await runtime.open_inbox("app.local")
    console = await open_console(runtime)
    async with http.get(console.url + "api/agents") as response:
        agents = {a["aid"]: a for a in await response.json()}
    assert agents["rec.local"]["role"] == "agent"
    assert agents["rec.local"]["mode"] == "autonomous"
    assert agents["rec.local"]["description"] == "keeps everything"
    assert agents["app.local"]["role"] == "inbox"


async def test_agent_md_cards_are_served_parsed(
    runtime: AUNRuntime, open_console: OpenConsole, http: aiohttp.ClientSession
) -> None:
    card = (
        "---\naid: rec.local\nname: Recorder\ntype: assistant\nversion: 0.1.0\n"
        "description: keeps what it hears\ntags: [memory]\n---\nKeeps everything.\n"
    )
    await runtime.register_agent("rec.local", Recorder, card=card)
    console = await open_console(runtime)
    async with http.get(console.url + "api/agents") as response:
        (agent,) = await response.json()
    assert agent["card"] == card
    assert agent["description"] == "keeps what it hears"
    assert agent["card_fields"] == {
        "name": "Recorder",
        "type": "assistant",
        "version": "0.1.0",
        "description": "keeps what it hears",
        "tags": ["memory"],
        "body": "Keeps everything.\n",
    }


def test_sending_needs_a_runtime_in_this_process(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="allow_send needs the runtime"):
        Console(tmp_path / "a.sqlite", allow_send=True)


def test_an_invalid_card_from_a_foreign_archive_is_shown_with_its_error() -> None:
    entries = [AgentEntry("x.local", "agent", "autonomous", "", "no front matter here", 0)]
    (item,) = json.loads(encode_agents(entries))
    assert item["card"] == "no front matter here"
    assert "front matter" in item["card_error"]
    assert "card_fields" not in item
