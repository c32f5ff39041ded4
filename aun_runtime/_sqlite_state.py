"""An agent state store in an SQLite file: evicted agents cost no memory, and resume after a restart.

:class:`MemoryStateStore` keeps each evicted agent's state in the process, so an idle agent still
costs the size of its state. :class:`SQLiteStateStore` keeps it in a file instead: an idle agent
costs only its registration, and an agent whose state is in the file resumes from it when it is
next created, in this process or in the next one that opens the file (virtual actors with durable
state). The actor runtime saves every instance still in memory into a durable store when it is
closed, so a runtime restarted on the same file carries on where the last one stopped.

Writes are deferred: ``put`` and ``take`` change a small table of pending changes in memory, which
goes to the file in one transaction when :data:`PENDING_LIMIT` changes wait, before any read that
needs the file, and on :meth:`SQLiteStateStore.close`. Evictions come in bursts (thousands of agents
going idle at once), and one transaction per agent would cost a file sync each. A change not yet
written is lost if the process dies, as the instance it came from would have been.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from autogen_core import AgentId

from ._agent_state import decoded_state

__all__ = ["PENDING_LIMIT", "SQLiteStateStore"]

#: Changes kept in memory before they are written together. One transaction for 1,024 states
#: costs about what a dozen single-row transactions do; 1,024 small states are a few hundred
#: kilobytes waiting.
PENDING_LIMIT = 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_states (
    agent_type TEXT NOT NULL,
    agent_key TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (agent_type, agent_key)
) WITHOUT ROWID;
"""

_Key = tuple[str, str]


class SQLiteStateStore:
    """Keeps the saved state of agents that are not in memory in an SQLite file.

    Args:
        path: the file (created with its directory if missing). It may be the runtime's archive
            file: the store keeps to its own table.

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
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        # key -> the state's JSON to write, or None to delete what the file holds for it.
        self._pending: dict[_Key, str | None] = {}
        self._closed = False

    def put(self, agent: AgentId, state: Mapping[str, Any]) -> None:
        """Keep ``state`` for ``agent``, replacing what was there.

        Raises:
            TypeError: the state is not JSON-serialisable (autogen-core requires that it be).
        """
        self._change((agent.type, agent.key), json.dumps(state, separators=(",", ":")))

    def take(self, agent: AgentId) -> Mapping[str, Any] | None:
        """Remove and return the state kept for ``agent`` (None if there is none)."""
        key = (agent.type, agent.key)
        text = self._pending[key] if key in self._pending else self._read(key)
        if text is None:
            return None
        self._change(key, None)
        return decoded_state(text)

    def peek(self, agent: AgentId) -> Mapping[str, Any] | None:
        """The state kept for ``agent``, left in place (None if there is none)."""
        key = (agent.type, agent.key)
        text = self._pending[key] if key in self._pending else self._read(key)
        return None if text is None else decoded_state(text)

    def items(self) -> Iterator[tuple[AgentId, Mapping[str, Any]]]:
        """Every kept state (read in one go: the store may change while the caller goes through them)."""
        self.flush()
        rows = self._db.execute("SELECT agent_type, agent_key, state FROM agent_states").fetchall()
        return iter([(AgentId(type_, key), decoded_state(text)) for type_, key, text in rows])

    def __len__(self) -> int:
        self.flush()
        return int(self._db.execute("SELECT COUNT(*) FROM agent_states").fetchone()[0])

    def flush(self) -> None:
        """Write the pending changes now, in one transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        try:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO agent_states (agent_type, agent_key, state) VALUES (?, ?, ?)",
                [(type_, key, text) for (type_, key), text in pending.items() if text is not None],
            )
            self._db.executemany(
                "DELETE FROM agent_states WHERE agent_type = ? AND agent_key = ?",
                [key for key, text in pending.items() if text is None],
            )
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            pending.update(self._pending)  # changes made since are newer: they win
            self._pending = pending
            raise

    def close(self) -> None:
        """Write the pending changes and close the file. Idempotent."""
        if self._closed:
            return
        self.flush()
        self._db.close()
        self._closed = True

    def _change(self, key: _Key, text: str | None) -> None:
        self._pending[key] = text
        if len(self._pending) >= PENDING_LIMIT:
            self.flush()

    def _read(self, key: _Key) -> str | None:
        row = self._db.execute(
            "SELECT state FROM agent_states WHERE agent_type = ? AND agent_key = ?", key
        ).fetchone()
        return None if row is None else str(row[0])

