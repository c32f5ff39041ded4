"""Record the notebooks' cassettes again, then refresh the notebooks' saved outputs from them.

Offline, the answers come from the deterministic stand-in models in ``agents.stand_ins``::

    python notebooks/record_cassettes.py                  # every notebook
    python notebooks/record_cassettes.py 01_reflection    # one

With a model configured, the cassettes hold that model's answers instead::

    AUN_MODEL=llama3.1 AUN_MODEL_BASE_URL=http://localhost:11434/v1 python notebooks/record_cassettes.py

Each cassette is rewritten from scratch (stale entries go), then the notebook is run once more from
the cassette alone, offline, and saved with those outputs: what is committed is what replay shows.
"""

from __future__ import annotations

import os
import sys

import nbformat
from _execution import HERE, NOTEBOOKS, execute, offline_environment


def record(name: str) -> None:
    stand_in = NOTEBOOKS[name]
    if stand_in is not None:
        cassette = HERE / "cassettes" / f"{name}.json"
        cassette.unlink(missing_ok=True)
        live = {k: v for k, v in os.environ.items() if k.startswith("AUN_MODEL")}
        if not live.get("AUN_MODEL"):
            live["AUN_MODEL_CLIENT"] = f"agents.stand_ins:{stand_in}"
        execute(name, offline_environment({**live, "AUN_MODEL_RECORD": "1"}))
        print(f"{name}: recorded {cassette.relative_to(HERE)}")
    notebook = execute(name, offline_environment())
    nbformat.write(notebook, HERE / f"{name}.ipynb")
    print(f"{name}: outputs refreshed from replay")


def main(names: list[str]) -> int:
    for name in names or list(NOTEBOOKS):
        if name not in NOTEBOOKS:
            print(f"unknown notebook {name!r}; known: {', '.join(NOTEBOOKS)}", file=sys.stderr)
            return 2
        record(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
