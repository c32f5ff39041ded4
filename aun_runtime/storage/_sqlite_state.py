"""An agent state store in an SQLite file: evicted agents cost no memory, and resume after a restart.

[`MemoryStateStore`][aun_runtime.MemoryStateStore] keeps each evicted agent's state in the process, so an idle agent still
costs the size of its state. [`SQLiteStateStore`][aun_runtime.SQLiteStateStore] keeps it in a file instead: an idle agent
costs only its registration, and an agent whose state is in the file resumes from it when it is
next created, in this process or in the next one that opens the file (virtual actors with durable
state). The actor runtime saves every instance still in memory into a durable store when it is
closed, so a runtime restarted on the same file carries on where the last one stopped.

Writes are deferred: `put` changes a small table of pending states in memory, which goes to the
file in one transaction when `PENDING_LIMIT` states wait, before any read that needs the
file, and on [`SQLiteStateStore.close`][aun_runtime.SQLiteStateStore.close]. Evictions come in bursts (thousands of agents going
idle at once), and one transaction per agent would cost a file sync each. Nothing is ever deleted:
`take` hands an agent's state to its new instance and hides it from the store's readers, but
leaves the row in the file until the agent's next save replaces it. So a process that dies loses
only what changed since each agent was last saved, never an older state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from autogen_core import AgentId

from ._agent_state import decoded_state
from ._sqlite import SQLiteStorage

__all__ = ["PENDING_LIMIT", "SQLiteStateStore"]

#: Changes kept in memory before they are written together. One transaction for 1,024 states
#: costs about what a dozen single-row transactions do; 1,024 small states are a few hundred
#: kilobytes waiting.
PENDING_LIMIT = 1024

#: A row's state replaces the one kept for its agent.
_UPSERT = (
    "INSERT INTO agent_states (agent_type, agent_key, state) VALUES (?, ?, ?)"
    " ON CONFLICT (agent_type, agent_key) DO UPDATE SET state = excluded.state"
)

_Key = tuple[str, str]


class SQLiteStateStore:
    """Keeps the saved state of agents that are not in memory in an SQLite file.

    Args:
        path: the file (created with its directory if missing). It may be the runtime's archive
            file: the store keeps to its own table.

    Raises:
        StorageUnavailableError: `path` is no regular file or no SQLite database, or cannot be made.

    Example:
        >>> import tempfile, pathlib
        >>> from autogen_core import AgentId
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "states.sqlite"
        >>> store = SQLiteStateStore(path)
        >>> store.put(AgentId("coder.local", "default"), {"drafts": 3})
        >>> store.close()
        >>> again = SQLiteStateStore(path)
        >>> again.take(AgentId("coder.local", "default"))
        {'drafts': 3}
        >>> again.take(AgentId("coder.local", "default")) is None
        True
        >>> again.close()
    """

    #: The runtime saves instances still in memory into this store when it is closed.
    durable = True

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.storage = SQLiteStorage(self.path)
        self.storage.script(self.storage.dialect.agent_states_table)
        self._pending: dict[_Key, str] = {}  # states to write
        # Agents whose state an instance in memory holds: hidden from readers, kept in the file.
        self._taken: set[_Key] = set()
        self._closed = False

    def put(self, agent: AgentId, state: Mapping[str, Any]) -> None:
        """Keep `state` for `agent`, replacing what was there.

        Raises:
            TypeError: the state is not JSON-serialisable (autogen-core requires that it be).
        """
        key = (agent.type, agent.key)
        self._pending[key] = json.dumps(state, separators=(",", ":"))
        self._taken.discard(key)
        if len(self._pending) >= PENDING_LIMIT:
            self.flush()

    def take(self, agent: AgentId) -> Mapping[str, Any] | None:
        """Return the state kept for `agent` and stop offering it (None if there is none).

        The row stays in the file, the agent's last saved state, until its next `put`.
        """
        key = (agent.type, agent.key)
        text = self._lookup(key)
        if text is None:
            return None
        self._taken.add(key)
        return decoded_state(text)

    def peek(self, agent: AgentId) -> Mapping[str, Any] | None:
        """The state kept for `agent`, left in place (None if there is none)."""
        text = self._lookup((agent.type, agent.key))
        return None if text is None else decoded_state(text)

    def items(self) -> Iterator[tuple[AgentId, Mapping[str, Any]]]:
        """Every kept state (read in one go: the store may change while the caller goes through them)."""
        self.flush()
        rows = self.storage.fetch("SELECT agent_type, agent_key, state FROM agent_states")
        taken = self._taken
        return iter(
            [(AgentId(type_, key), decoded_state(text)) for type_, key, text in rows if (type_, key) not in taken]
        )

    def __len__(self) -> int:
        self.flush()
        # Every taken key has its row (it came from the file, or was written by the flush above).
        return int(self.storage.fetch("SELECT COUNT(*) FROM agent_states")[0][0]) - len(self._taken)

    def flush(self) -> None:
        """Write the pending states now, in one transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        try:
            with self.storage.transaction():
                self.storage.executemany(_UPSERT, [(type_, key, text) for (type_, key), text in pending.items()])
        except BaseException:
            pending.update(self._pending)  # states put since are newer: they win
            self._pending = pending
            raise

    def close(self) -> None:
        """Write the pending changes and close the file. Idempotent."""
        if self._closed:
            return
        self.flush()
        self.storage.close()
        self._closed = True

    def _lookup(self, key: _Key) -> str | None:
        if key in self._taken:
            return None
        text = self._pending.get(key)
        return text if text is not None else self._read(key)

    def _read(self, key: _Key) -> str | None:
        rows = self.storage.fetch("SELECT state FROM agent_states WHERE agent_type = ? AND agent_key = ?", key)
        return str(rows[0][0]) if rows else None

