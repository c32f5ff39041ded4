"""Every notebook, pointed at a model that always answers, ends by itself, and asks it little.

The model is the loopback OpenAI-compatible stand-in (tests/models/openai_stand_in.py) answering
every request with the same plain text (``model_shapes.always_answers``), over real HTTP through the
real OpenAI client: what a notebook gets when ``AUN_MODEL`` names a chatty model. The notebooks' own
expectations about content fail with such a model, so cell errors are allowed; what must hold is
that every notebook runs to its last cell within the cell timeout, and that the number of model
requests stays a small multiple of what the notebook's humans (or its scripted customer) say.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.models import model_shapes
from tests.models.openai_stand_in import openai_stand_in

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS_DIR))

from _execution import NOTEBOOKS, execute, offline_environment, text_outputs  # noqa: E402

#: Seconds one cell may take here. Offline every cell takes well under a second; the slowest cell
#: under this model waits three seconds for a follow-up that never comes.
CELL_TIMEOUT = 30

#: Per notebook: (messages its humans send that reach a model, model calls each may cost), and why.
#: The product is the bound; the counts measured when it was set are in the comments.
BOUNDS: dict[str, tuple[int, int]] = {
    # 3 coding tasks; each is at most max_rounds (3) rounds of a coder call and a reviewer call.
    "01_reflection": (3, 6),  # measured 16 (the last task has max_rounds=2)
    # 6 posts to a broadcast group of 3 observers, plus 1 mention in the mention-mode group (the 2
    # unaddressed posts there are filtered and cost nothing). Each member takes one turn on a post;
    # the one addressed may also answer one of the others' replies, once (unaddressed_replies=1).
    "02_observer_group_chat": (7, 4),  # measured 22
    # 1 product description through 3 stages, one call each.
    "03_sequential_workflow": (1, 3),  # measured 3
    # 2 gather requests, to 3 workers and then to 2, one call each.
    "04_concurrent_agents": (2, 3),  # measured 5
    # 1 task: 3 + 2 workers in two layers, and the orchestrator's aggregation.
    "05_mixture_of_agents": (1, 6),  # measured 6
    # 1 question: 4 solvers for 2 rounds.
    "06_multi_agent_debate": (1, 8),  # measured 8
    # 3 customer lines; triage answers each in text (a handoff would add a call or two).
    "07_handoffs": (3, 3),  # measured 3
    # 8 messages from alice: 7 direct ones, one call each, and 1 post to a group of 3, one call per
    # member. Each agent asked thinks in text and says nothing, so nothing it sends costs another call.
    "08_autonomous_model_agent": (8, 2),  # measured 10
}

WITH_MODEL = sorted(name for name, stand_in in NOTEBOOKS.items() if stand_in is not None)


def test_every_notebook_with_a_model_has_a_bound() -> None:
    assert sorted(BOUNDS) == WITH_MODEL


@pytest.mark.parametrize("name", WITH_MODEL)
def test_notebook_on_an_always_answering_model_ends_by_itself(name: str) -> None:
    with openai_stand_in(model_shapes.always_answers) as server:
        env = offline_environment(
            {"AUN_MODEL": "stand-in", "AUN_MODEL_BASE_URL": server.base_url, "AUN_MODEL_API_KEY": "x"}
        )
        started = time.monotonic()
        # A cell that does not finish raises here (CellTimeoutError), errors or not.
        executed = execute(name, env, allow_errors=True, timeout=CELL_TIMEOUT)
        took = time.monotonic() - started
        requests = list(server.requests)
    by_asker = Counter(model_shapes.asker(body) for body in requests)
    messages, each = BOUNDS[name]
    failed = [
        f"cell {n}: {text[:120]}"
        for n, cell in enumerate(text_outputs(executed))
        for text in cell
        if text.startswith("error:")
    ]
    measured = (
        f"{name}: {len(requests)} model requests in {took:.1f} s (bound {messages} x {each}); "
        f"by asker: {dict(by_asker)}; failed cells: {failed or 'none'}"
    )
    assert requests, f"the notebook never asked the configured model: {measured}"
    assert len(requests) <= messages * each, measured
    # It got to the end: the conversations settled and the last cell printed the message trace.
    last = text_outputs(executed)[-1]
    assert any("#1 " in text for text in last) and not any(t.startswith("error:") for t in last), measured
