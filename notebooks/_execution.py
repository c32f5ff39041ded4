"""Running the notebooks: with the cassette (offline), or recording it from a model.

Used by ``record_cassettes.py`` and by the test suite, so that both run a notebook the same way: a
fresh kernel whose working directory is this folder, with an environment that has no ``AUN_MODEL*``
variables unless they are given on purpose.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
#: Seconds one cell may take. The slowest cell runs a reflection round (a real Python process).
CELL_TIMEOUT = 120

#: Notebook -> the stand-in model that records its cassette offline (None: the notebook uses no model).
NOTEBOOKS: dict[str, str | None] = {
    "00_autonomous_semantics": None,
    "01_reflection": "reflection_team",
    "02_observer_group_chat": "observer_group",
    "03_sequential_workflow": "sequential_workflow",
    "04_concurrent_agents": "concurrent_workers",
    "05_mixture_of_agents": "mixture_of_agents",
    "06_multi_agent_debate": "debate",
    "07_handoffs": "handoffs",
    "08_autonomous_model_agent": "autonomous_agents",
}


def offline_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any model configuration, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUN_MODEL")}
    env.update(extra or {})
    return env


def execute(
    name: str,
    env: Mapping[str, str],
    *,
    allow_errors: bool = False,
    timeout: int = CELL_TIMEOUT,
) -> nbformat.NotebookNode:
    """Run notebook ``name`` top to bottom in a fresh kernel.

    Raises on the first failing cell, unless ``allow_errors``: then every cell runs and a failure is
    kept as that cell's error output. A cell that takes longer than ``timeout`` seconds raises either way.
    """
    notebook = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(HERE)}},
    )
    client.execute(env=dict(env))
    return notebook


def text_outputs(notebook: nbformat.NotebookNode) -> list[list[str]]:
    """Each code cell's printed and displayed text, for comparing two runs."""
    cells = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        texts: list[str] = []
        last_stream = None
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                # How printed text is split into stream outputs depends on timing: join the pieces.
                if last_stream == output.name:
                    texts[-1] += output.text
                else:
                    texts.append(f"{output.name}: {output.text}")
                last_stream = output.name
                continue
            last_stream = None
            if output.output_type in ("execute_result", "display_data"):
                texts.append(str(output.get("data", {}).get("text/plain", "")))
            elif output.output_type == "error":
                texts.append(f"error: {output.ename}: {output.evalue}")
        cells.append(texts)
    return cells
