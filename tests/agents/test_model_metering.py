"""Every model call an agent of ``agents/`` makes is metered, however many one turn makes: read from
the source, each call goes to a client the agent made with ``use_model`` (which meters it), and the
agentchat adapter meters the clients of the chat agent it runs. A new agent that called a client of
its own would pass its budgets by, and fails here."""

from __future__ import annotations

import ast
from pathlib import Path

AGENTS = Path(__file__).resolve().parents[2] / "agents"
MODEL_CALLS = {"create", "create_stream"}


def _sources() -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text()) for path in sorted(AGENTS.glob("*.py"))}


def test_every_model_call_in_agents_goes_to_a_metered_client() -> None:
    unmetered: list[str] = []
    for name, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MODEL_CALLS:
                receiver = ast.unparse(node.func.value)
                if receiver != "self.model":
                    unmetered.append(f"{name}:{node.lineno}: {receiver}.{node.func.attr}(...)")
            if isinstance(node, ast.Assign) and any(ast.unparse(t) == "self.model" for t in node.targets):
                made = node.value
                if not (isinstance(made, ast.Call) and ast.unparse(made.func) == "use_model"):
                    unmetered.append(f"{name}:{node.lineno}: self.model = {ast.unparse(made)}")
    assert unmetered == []


def test_the_model_using_agents_are_the_ones_checked() -> None:
    # A guard on the rule above: it does see the agents that call models.
    calling = {
        name
        for name, tree in _sources().items()
        if any(isinstance(n, ast.Attribute) and n.attr in MODEL_CALLS for n in ast.walk(tree))
    }
    assert {"autonomous.py", "observer.py", "reflection.py", "handoffs.py", "debate.py"} <= calling
    agentchat = ast.unparse(_sources()["agentchat.py"])
    assert "meter_model_clients(agent)" in agentchat
