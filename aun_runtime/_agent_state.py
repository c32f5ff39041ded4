"""Where the state of evicted agents waits for their next message.

When a runtime drops an idle agent instance (virtual-actor style), it keeps what the agent's
``save_state`` returned, keyed by ``str(agent_id)``, and hands it to ``load_state`` of the new
instance created for the agent's next message. The store is also where ``load_state`` of the whole
runtime parks the state of agents that are not in memory, so that loading 100,000 agents' state
does not create 100,000 instances.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["AgentStateStore", "MemoryStateStore"]


@runtime_checkable
class AgentStateStore(Protocol):
    """Keeps the saved state of agents that are not in memory, keyed by ``str(agent_id)``."""

    def put(self, key: str, state: Mapping[str, Any]) -> None:
        """Keep ``state`` for ``key``, replacing what was there."""
        ...

    def take(self, key: str) -> Mapping[str, Any] | None:
        """Remove and return the state kept for ``key`` (None if there is none)."""
        ...

    def peek(self, key: str) -> Mapping[str, Any] | None:
        """The state kept for ``key``, left in place (None if there is none)."""
        ...

    def items(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """Every kept state."""
        ...

    def __len__(self) -> int: ...


class MemoryStateStore:
    """An in-process store: a dictionary. The states are kept as returned, not copied: the agent
    that returned one is gone by the time it is stored."""

    __slots__ = ("_states",)

    def __init__(self) -> None:
        self._states: dict[str, Mapping[str, Any]] = {}

    def put(self, key: str, state: Mapping[str, Any]) -> None:
        self._states[key] = state

    def take(self, key: str) -> Mapping[str, Any] | None:
        return self._states.pop(key, None)

    def peek(self, key: str) -> Mapping[str, Any] | None:
        return self._states.get(key)

    def items(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        return iter(list(self._states.items()))

    def __len__(self) -> int:
        return len(self._states)
