"""The tutorial's code, run as written: every python block of docs/tutorial.md, in order, in one namespace.

Each ``print(...)  # output`` line on the page says what it prints; the run must print exactly that.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SHOWN = re.compile(r"^\s*print\(.*\)  # (.+)$", re.MULTILINE)


def _blocks() -> list[str]:
    return BLOCK.findall(TUTORIAL.read_text(encoding="utf-8"))


def test_the_tutorial_runs_in_order_and_prints_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = _blocks()
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)  # a block that writes a file writes it here
    namespace: dict[str, object] = {"__name__": "__tutorial__"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{TUTORIAL.name}, python block {number}", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed == SHOWN.findall("\n".join(blocks))
