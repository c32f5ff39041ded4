"""The deterministic client: answers keyed by request content, whatever the call order."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage, SystemMessage, UserMessage
from pydantic import BaseModel

from aun_runtime.models import (
    Cassette,
    CassetteChatCompletionClient,
    CassetteFileError,
    CassetteMissError,
    ModelRequest,
    ScriptedChatCompletionClient,
)


def ask(n: int) -> list[SystemMessage | UserMessage]:
    return [SystemMessage(content="You square numbers."), UserMessage(content=f"square {n}", source="app")]


def squares(request: ModelRequest) -> str:
    n = int(request.last_text.split()[-1])
    return str(n * n)


async def test_answers_do_not_depend_on_call_order() -> None:
    live = ScriptedChatCompletionClient(squares)
    cassette = Cassette()
    recorder = CassetteChatCompletionClient(cassette, record_from=live)
    await asyncio.gather(*(recorder.create(ask(n)) for n in range(20)))

    replay = CassetteChatCompletionClient(cassette)
    for seed in (1, 2, 3):
        order = list(range(20))
        random.Random(seed).shuffle(order)
        results = await asyncio.gather(*(replay.create(ask(n)) for n in order))
        assert [r.content for r in results] == [str(n * n) for n in order]
        assert all(r.cached for r in results)


async def test_record_then_replay_through_a_file(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "squares.json"
    live = ScriptedChatCompletionClient(squares)
    recorder = CassetteChatCompletionClient(path, record_from=live)
    first = await recorder.create(ask(7))
    again = await recorder.create(ask(7))  # a hit: the live model is not asked twice
    assert first.content == again.content == "49"
    assert len(live.requests) == 1 and recorder.recorded == 1

    replay = CassetteChatCompletionClient(path)
    result = await replay.create(ask(7))
    assert result.content == "49" and result.cached
    data = json.loads(path.read_text())
    assert data["format"] == "aun-cassette/1"
    [entry] = data["entries"]
    assert entry["request"]["messages"][1]["content"] == "square 7"  # readable: the request is stored


async def test_file_is_identical_whatever_the_recording_order(tmp_path: Path) -> None:
    texts = []
    for seed in (1, 2):
        order = list(range(12))
        random.Random(seed).shuffle(order)
        path = tmp_path / f"run{seed}.json"
        recorder = CassetteChatCompletionClient(path, record_from=ScriptedChatCompletionClient(squares))
        await asyncio.gather(*(recorder.create(ask(n)) for n in order))
        texts.append(path.read_text())
    assert texts[0] == texts[1]


async def test_concurrent_identical_requests_are_recorded_once() -> None:
    live = ScriptedChatCompletionClient(squares)
    recorder = CassetteChatCompletionClient(Cassette(), record_from=live)
    results = await asyncio.gather(*(recorder.create(ask(3)) for _ in range(5)))
    assert {r.content for r in results} == {"9"}
    assert len(live.requests) == 1


async def test_a_missing_entry_is_a_clear_error_naming_the_request() -> None:
    cassette = Cassette()
    cassette.add(ask(2), "4")
    replay = CassetteChatCompletionClient(cassette)
    with pytest.raises(CassetteMissError) as caught:
        await replay.create(ask(3))
    text = str(caught.value)
    assert caught.value.key == ModelRequest.build(ask(3)).key
    assert "square 3" in text  # names what was asked
    assert "matches the first 1 of 2 messages" in text  # and where it departs from the recording
    assert "recorded:  '[app] square 2'" in text and "requested: '[app] square 3'" in text
    assert "AUN_MODEL_RECORD=1" in text  # and how to record it


async def test_a_miss_in_other_settings_says_which() -> None:
    cassette = Cassette()
    cassette.add(ask(2), "4")
    with pytest.raises(CassetteMissError, match="differs in: json_output"):
        await CassetteChatCompletionClient(cassette).create(ask(2), json_output=True)


async def test_the_key_covers_tools_json_mode_and_structured_output() -> None:
    class Verdict(BaseModel):
        ok: bool

    base = ModelRequest.build(ask(1)).key
    assert ModelRequest.build(ask(1), json_output=True).key != base
    assert ModelRequest.build(ask(1), json_output=Verdict).key not in {
        base,
        ModelRequest.build(ask(1), json_output=True).key,
    }
    tool = {"name": "lookup", "description": "look up", "parameters": {"type": "object", "properties": {}}}
    assert ModelRequest.build(ask(1), tools=[tool]).key != base
    assert ModelRequest.build(ask(1)).key == base  # stable


async def test_a_missing_cassette_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CassetteFileError, match="does not exist"):
        CassetteChatCompletionClient(tmp_path / "nope.json")


async def test_an_edited_request_is_refused_on_load(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cassette = Cassette(path)
    cassette.add(ask(2), "4")
    cassette.save()
    data = json.loads(path.read_text())
    data["entries"][0]["request"]["messages"][1]["content"] = "square 5"
    path.write_text(json.dumps(data))
    with pytest.raises(CassetteFileError, match="does not match its request"):
        Cassette.load(path)
    data["entries"][0]["request"]["messages"][1]["content"] = "square 2"
    data["entries"][0]["response"]["content"] = "four"  # answers may be edited
    path.write_text(json.dumps(data))
    assert (await CassetteChatCompletionClient(path).create(ask(2))).content == "four"


async def test_streams_replay_in_the_recorded_chunks() -> None:
    live = ScriptedChatCompletionClient(lambda request: ["__SIL", "ENT__", " not my topic"])
    recorder = CassetteChatCompletionClient(Cassette(), record_from=live)
    recorded = [c async for c in recorder.create_stream(ask(1))]
    replay = CassetteChatCompletionClient(recorder.cassette)
    replayed = [c async for c in replay.create_stream(ask(1))]
    assert replayed[:-1] == recorded[:-1] == ["__SIL", "ENT__", " not my topic"]
    final = replayed[-1]
    assert isinstance(final, CreateResult) and final.content == "__SILENT__ not my topic"
    assert (await replay.create(ask(1))).content == "__SILENT__ not my topic"  # same answer, not streamed


async def test_function_calls_are_recorded_and_replayed(tmp_path: Path) -> None:
    call = FunctionCall(id="call_1", name="transfer_to_sales", arguments="{}")
    result = CreateResult(
        finish_reason="function_calls", content=[call], usage=RequestUsage(1, 1), cached=False
    )
    path = tmp_path / "tools.json"
    await CassetteChatCompletionClient(
        path, record_from=ScriptedChatCompletionClient(lambda r: result)
    ).create(ask(1))
    replayed = await CassetteChatCompletionClient(path).create(ask(1))
    assert replayed.content == [call]


async def test_usage_and_requests_are_counted() -> None:
    client = ScriptedChatCompletionClient(squares)
    await client.create(ask(4))
    await client.create(ask(5))
    assert len(client.requests) == 2
    assert client.total_usage().completion_tokens >= 0
    assert client.remaining_tokens(ask(1)) < 128_000
