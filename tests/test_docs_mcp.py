"""docs/mcp.md, run as written: its blocks in order in one namespace, printing what its "It prints:"
block shows, with a real MCP server that is gone once the example's runtime has stopped."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tests.test_docs_examples import BLOCK, MODEL_VARIABLES, PRINTS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"


def _gazetteers() -> list[psutil.Process]:
    return [child for child in psutil.Process().children(recursive=True) if "agents.gazetteer" in child.cmdline()]


def test_the_mcp_page_runs_prints_what_it_shows_and_leaves_no_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in MODEL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(PAGE.parents[1])
    text = PAGE.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) == 3
    namespace: dict[str, object] = {"__name__": "__mcp__"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{PAGE.name}, python block {number}", "exec"), namespace)
    assert capsys.readouterr().out == "".join(PRINTS.findall(text))
    for child in _gazetteers():  # stopping the workbench ended its server (give it a moment to go)
        child.wait(timeout=5)
    assert _gazetteers() == []
