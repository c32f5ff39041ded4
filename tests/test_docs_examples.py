"""The documentation's code, run as written.

Every python block of docs/tutorial.md runs in order, in one namespace; each ``print(...)  # output``
line on the page says what it prints, and the run must print exactly that. Every page under
docs/patterns/ runs the same way, one namespace per page, and must print what its "It prints:" blocks
show.
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


PATTERNS = TUTORIAL.parent / "patterns"
PAGES = sorted(PATTERNS.glob("*.md"))
# A page shows what its example prints in a ```text block right after "It prints:".
PRINTS = re.compile(r"^It prints:\n\n```text\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# What a real model would be configured with; unset, every page runs on its stand-in model or cassette.
MODEL_VARIABLES = ("AUN_MODEL", "AUN_MODEL_CLIENT", "AUN_MODEL_RECORD")


def test_there_is_a_page_per_pattern_notebook() -> None:
    notebooks = sorted((TUTORIAL.parents[1] / "notebooks").glob("0*.ipynb"))
    pages = [page.name for page in PAGES if page.name != "index.md"]
    assert len(pages) == len(notebooks) == 9
    assert [name[:2] for name in pages] == [notebook.name[:2] for notebook in notebooks]


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_each_pattern_page_runs_and_prints_what_it_shows(
    page: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in MODEL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(TUTORIAL.parents[1])  # paths on the pages are from the repository root
    text = page.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert blocks, f"{page.name} has no python block"
    namespace: dict[str, object] = {"__name__": f"__{page.stem}__"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{page.name}, python block {number}", "exec"), namespace)
    shown = "".join(PRINTS.findall(text))
    assert capsys.readouterr().out == shown
