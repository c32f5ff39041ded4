"""Where the state of evicted agents waits for their next message.

When a runtime drops an idle agent instance (virtual-actor style), it keeps what the agent's
`save_state` returned, keyed by its `AgentId`, and hands it to `load_state` of the new
instance created for the agent's next message. The store is also where `load_state` of the whole
runtime parks the state of agents that are not in memory, so that loading 100,000 agents' state
does not create 100,000 instances.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from autogen_core import AgentId

__all__ = ["AgentStateStore", "MemoryStateStore"]


@runtime_checkable
class AgentStateStore(Protocol):
    """Keeps the saved state of agents that are not in memory.

    A store says what it is: `durable` whether what it keeps outlives the process (then the runtime
    saves the instances still in memory into it when it is closed, for the next process to resume
    them), and `close` is called once, when the runtime is closed.
    """

    #: What is kept outlives the process (a file): the runtime saves its instances into it at close.
    durable: bool

    def put(self, agent: AgentId, state: Mapping[str, Any]) -> None:
        """Keep `state` for `agent`, replacing what was there."""
        ...

    def take(self, agent: AgentId) -> Mapping[str, Any] | None:
        """Remove and return the state kept for `agent` (None if there is none)."""
        ...

    def peek(self, agent: AgentId) -> Mapping[str, Any] | None:
        """The state kept for `agent`, left in place (None if there is none)."""
        ...

    def items(self) -> Iterator[tuple[AgentId, Mapping[str, Any]]]:
        """Every kept state."""
        ...

    def __len__(self) -> int: ...

    def close(self) -> None:
        """Write what is pending and let go of what the store holds open. Idempotent."""
        ...


class MemoryStateStore:
    """An in-process store that keeps each state as JSON text.

    autogen-core requires agent state to be JSON-serialisable, and as text it is several times
    smaller than the live dictionaries (100,000 evicted agents each keep one), shares nothing with
    the dropped instance, and comes back as a fresh copy. An agent with the key `default` (every
    AUN agent) is filed under its type string, the very object the runtime already holds for it.
    """

    __slots__ = ("_states",)

    #: The states go with the process: nothing is saved into it at close.
    durable = False

    def __init__(self) -> None:
        self._states: dict[str | tuple[str, str], str] = {}

    def put(self, agent: AgentId, state: Mapping[str, Any]) -> None:
        self._states[_key(agent)] = json.dumps(state, separators=(",", ":"))

    def take(self, agent: AgentId) -> Mapping[str, Any] | None:
        text = self._states.pop(_key(agent), None)
        return None if text is None else decoded_state(text)

    def peek(self, agent: AgentId) -> Mapping[str, Any] | None:
        text = self._states.get(_key(agent))
        return None if text is None else decoded_state(text)

    def items(self) -> Iterator[tuple[AgentId, Mapping[str, Any]]]:
        return iter(
            [
                (AgentId(key, "default") if isinstance(key, str) else AgentId(*key), decoded_state(text))
                for key, text in self._states.items()
            ]
        )

    def __len__(self) -> int:
        return len(self._states)

    def close(self) -> None:
        """Nothing to let go of: the states are the process's."""


def _key(agent: AgentId) -> str | tuple[str, str]:
    return agent.type if agent.key == "default" else (agent.type, agent.key)


def decoded_state(text: str) -> Mapping[str, Any]:
    """A state from the JSON a store kept it as."""
    state = json.loads(text)
    if not isinstance(state, dict):
        raise TypeError(f"a saved agent state is a mapping, not {type(state).__name__}")
    return state
