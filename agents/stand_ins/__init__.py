"""Deterministic stand-in models for the patterns: what answers when no model is configured.

Each stand-in is a pure function of the request (a
[`ScriptedChatCompletionClient`][aun_runtime.models.ScriptedChatCompletionClient]): it reads the prompt the agents built and
answers the way a capable model following that prompt would, so the demo runs with no network and the
notebook cassettes can be recorded offline, e.g.
`AUN_MODEL_CLIENT=agents.stand_ins:reflection_team AUN_MODEL_RECORD=1`. They fake the model only;
everything around them (runtime, archive, code execution) is real.
"""

from .autonomous import autonomous_agents
from .debate import debate
from .handoffs import handoffs
from .observer import DEMO_OBSERVERS, ObserverProfile, ObserverStandIn, observer_group
from .reflection import reflection_team
from .scout import gazetteer_scout
from .workflows import concurrent_workers, mixture_of_agents, sequential_workflow

__all__ = [
    "DEMO_OBSERVERS",
    "ObserverProfile",
    "ObserverStandIn",
    "autonomous_agents",
    "concurrent_workers",
    "debate",
    "gazetteer_scout",
    "handoffs",
    "mixture_of_agents",
    "observer_group",
    "reflection_team",
    "sequential_workflow",
]
