"""Every notebook runs top to bottom offline, from its committed cassette, and shows what is committed."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS_DIR))

from _execution import NOTEBOOKS, execute, offline_environment, text_outputs  # noqa: E402


def test_every_notebook_in_the_folder_is_run_by_this_suite() -> None:
    assert sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")) == sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_offline_and_matches_its_saved_outputs(name: str) -> None:
    executed = execute(name, offline_environment())
    outputs = text_outputs(executed)
    assert not any(text.startswith("error:") for cell in outputs for text in cell)
    committed = text_outputs(nbformat.read(NOTEBOOKS_DIR / f"{name}.ipynb", as_version=4))
    # Same outputs as committed: replay is deterministic, and the saved notebook is not stale.
    assert outputs == committed
    assert any("#1 " in text for text in outputs[-1]), "the notebook ends with the message trace"
    if NOTEBOOKS[name] is not None:
        assert (NOTEBOOKS_DIR / "cassettes" / f"{name}.json").exists()
        assert any("replaying cassette" in text for cell in outputs for text in cell)
