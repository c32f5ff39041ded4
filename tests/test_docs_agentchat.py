"""docs/model-agents.md's agentchat example, run as written: an AssistantAgent with the send tools
and a person through a UserProxyAgent, printing what its "It prints:" block shows.

The page's model is whatever the environment configures; here that is the real OpenAI client
talking to the model stand-in on loopback, which answers as a model with function calling would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.models.openai_stand_in import ToolCalls, openai_stand_in
from tests.test_docs_examples import BLOCK, MODEL_VARIABLES, PRINTS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "model-agents.md"
SECTION = "## agentchat agents\n"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def _model(body: dict[str, Any]) -> ToolCalls:
    """The assistant's model: asks the person on call, then tells the asker what they said."""
    last = body["messages"][-1]
    if last == {"role": "user", "name": "alice_local", "content": "When did the last backup run?"}:
        return ToolCalls([("send_message", {"to": "oncall.local", "text": "alice.local asks: when did the last backup run?"})])
    if last == {"role": "user", "name": "oncall_local", "content": "At 02:00 tonight, and it was green."}:
        return ToolCalls([("send_message", {"to": "alice.local", "text": "The last backup ran at 02:00 tonight; it was green."})])
    raise AssertionError(f"the page's assistant was not expected to be asked about {last}")


def test_the_agentchat_example_runs_and_prints_what_it_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    section = _section()
    blocks = BLOCK.findall(section)
    assert len(blocks) == 1
    with openai_stand_in(_model) as server:
        for variable in MODEL_VARIABLES:
            monkeypatch.delenv(variable, raising=False)
        monkeypatch.setenv("AUN_MODEL", "stand-in")
        monkeypatch.setenv("AUN_MODEL_BASE_URL", server.base_url)
        monkeypatch.setenv("AUN_MODEL_API_KEY", "sk-local")
        exec(compile(blocks[0], f"{PAGE.name}, agentchat block", "exec"), {"__name__": "__agentchat__"})
    assert capsys.readouterr().out == "".join(PRINTS.findall(section))
    # One model call per message the assistant was handed, each offered the send tools and its instructions.
    assert len(server.requests) == 2
    for body in server.requests:
        assert {tool["function"]["name"] for tool in body["tools"]} == {"send_message", "post_to_group"}
        assert body["messages"][0]["role"] == "system" and "oncall.local" in body["messages"][0]["content"]
