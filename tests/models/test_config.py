"""Environment configuration: offline by default, any OpenAI-compatible server when AUN_MODEL is set."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import openai
import pytest
from autogen_core.models import SystemMessage, UserMessage

from aun_runtime.models import (
    DEFAULT_MODEL_RETRIES,
    DEFAULT_MODEL_TIMEOUT,
    Cassette,
    CassetteChatCompletionClient,
    CassetteFileError,
    ModelConfig,
    ModelConfigError,
    ModelUnavailableError,
    ScriptedChatCompletionClient,
    model_client_from_env,
)

from .openai_stand_in import openai_stand_in

MESSAGES = [SystemMessage(content="Be brief."), UserMessage(content="Say hi", source="app")]


def test_no_model_configured_means_replaying_the_cassette(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    Cassette(path).save()
    config = ModelConfig.from_env(cassette=path, environ={})
    assert config.source == "cassette" and config.cassette == str(path)
    assert "offline" in config.describe()
    assert isinstance(config.build(), CassetteChatCompletionClient)


def test_no_model_and_no_cassette_says_how_to_configure() -> None:
    with pytest.raises(ModelConfigError, match="AUN_MODEL"):
        model_client_from_env(environ={})


def test_a_missing_cassette_is_reported_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(CassetteFileError, match=str(tmp_path / "absent.json")):
        model_client_from_env(tmp_path / "absent.json", environ={})


def test_recording_needs_a_live_model(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="needs a live model"):
        ModelConfig.from_env(cassette=tmp_path / "c.json", environ={"AUN_MODEL_RECORD": "1"})


def test_bad_values_name_the_variable() -> None:
    with pytest.raises(ModelConfigError, match="AUN_MODEL_JSON_OUTPUT"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_JSON_OUTPUT": "maybe"})
    with pytest.raises(ModelConfigError, match="AUN_MODEL_TEMPERATURE"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_TEMPERATURE": "warm"})
    with pytest.raises(ModelConfigError, match="module:function"):
        model_client_from_env(environ={"AUN_MODEL_CLIENT": "nocolon"})


async def test_every_request_to_a_live_model_is_bounded_in_time() -> None:
    # A model server that takes every request and never answers: each one is given up on after the
    # timeout, sent once more (the retry), and the call then fails, transiently (its turn is retried
    # later), instead of holding its turn.
    never = threading.Event()

    def hold(body: dict[str, object]) -> str:
        never.wait(60)
        return "too late"

    with openai_stand_in(hold) as server:
        env = {
            "AUN_MODEL": "slow",
            "AUN_MODEL_BASE_URL": server.base_url,
            "AUN_MODEL_TIMEOUT": "0.5",
            "AUN_MODEL_RETRIES": "1",
        }
        client = model_client_from_env(environ=env)
        try:
            with pytest.raises(ModelUnavailableError, match="timed out") as raised:
                await asyncio.wait_for(client.create(MESSAGES), 30)
            assert isinstance(raised.value.__cause__, openai.APITimeoutError)
        finally:
            never.set()
            await client.close()
    assert len(server.requests) == 2  # the request, and its one retry


def test_the_model_timeout_defaults_and_bad_values() -> None:
    config = ModelConfig.from_env(environ={"AUN_MODEL": "m"})
    assert (config.timeout, config.max_retries) == (DEFAULT_MODEL_TIMEOUT, DEFAULT_MODEL_RETRIES) == (120.0, 30)
    assert (config.patience, config.max_concurrent, config.backoff, config.max_backoff) == (240.0, 8, 0.5, 30.0)
    tuned = ModelConfig.from_env(
        environ={"AUN_MODEL": "m", "AUN_MODEL_PATIENCE": "60", "AUN_MODEL_CONCURRENCY": "2",
                 "AUN_MODEL_BACKOFF": "1", "AUN_MODEL_MAX_BACKOFF": "10"}
    )
    assert (tuned.patience, tuned.max_concurrent, tuned.backoff, tuned.max_backoff) == (60.0, 2, 1.0, 10.0)
    with pytest.raises(ModelConfigError, match="AUN_MODEL_CONCURRENCY"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_CONCURRENCY": "2.5"})
    with pytest.raises(ModelConfigError, match="at least 1"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_CONCURRENCY": "0"})
    with pytest.raises(ModelConfigError, match="patience"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_PATIENCE": "-1"})
    with pytest.raises(ModelConfigError, match="AUN_MODEL_TIMEOUT"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_TIMEOUT": "soon"})
    with pytest.raises(ModelConfigError, match="positive"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_TIMEOUT": "0"})
    with pytest.raises(ModelConfigError, match="AUN_MODEL_RETRIES"):
        ModelConfig.from_env(environ={"AUN_MODEL": "m", "AUN_MODEL_RETRIES": "1.5"})


def test_the_config_carries_no_secret() -> None:
    config = ModelConfig.from_env(environ={"AUN_MODEL": "llama3", "AUN_MODEL_API_KEY": "sk-secret"})
    assert "sk-secret" not in repr(config) and "sk-secret" not in config.describe()
    assert config.api_key_env == "AUN_MODEL_API_KEY"


def stand_in_factory() -> ScriptedChatCompletionClient:
    return ScriptedChatCompletionClient(lambda request: "from the factory")


async def test_any_client_factory_plugs_in() -> None:
    client = model_client_from_env(environ={"AUN_MODEL_CLIENT": f"{__name__}:stand_in_factory"})
    assert (await client.create(MESSAGES)).content == "from the factory"


async def test_an_openai_compatible_server_is_used_when_aun_model_is_set() -> None:
    with openai_stand_in(lambda body: f"hello from {body['model']}") as server:
        env = {
            "AUN_MODEL": "llama3.2",
            "AUN_MODEL_BASE_URL": server.base_url,
            "AUN_MODEL_API_KEY": "sk-local",
            "AUN_MODEL_TEMPERATURE": "0",
        }
        client = model_client_from_env(environ=env)
        result = await client.create(MESSAGES, json_output=True)
        await client.close()
    assert result.content == "hello from llama3.2"
    [body] = server.requests
    assert body["model"] == "llama3.2" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["content"] for m in body["messages"]] == ["Be brief.", "Say hi"]
    assert server.headers[0]["authorization"] == "Bearer sk-local"


async def test_recording_a_live_server_then_replaying_offline(tmp_path: Path) -> None:
    path = tmp_path / "live.json"
    with openai_stand_in(lambda body: "recorded answer") as server:
        env = {"AUN_MODEL": "qwen", "AUN_MODEL_BASE_URL": server.base_url, "AUN_MODEL_RECORD": "1"}
        recorder = model_client_from_env(path, environ=env)
        assert isinstance(recorder, CassetteChatCompletionClient)
        assert (await recorder.create(MESSAGES)).content == "recorded answer"
    assert len(server.requests) == 1
    data = json.loads(path.read_text())
    assert data["model_info"]["json_output"] is True  # the live model's capabilities travel along
    offline = model_client_from_env(path, environ={})  # the server is gone: replay needs no network
    assert (await offline.create(MESSAGES)).content == "recorded answer"


def test_importing_the_models_package_loads_no_optional_client() -> None:
    import subprocess
    import sys

    code = "import sys, aun_runtime.models; print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'tiktoken')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
