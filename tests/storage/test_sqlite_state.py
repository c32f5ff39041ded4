"""SQLiteStateStore: evicted agents' state in a file, and agents that resume after a restart."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from autogen_core import AgentId, MessageContext, event

from aun_runtime import AUNActorRuntime, AUNAgent, AUNMessage, AUNRuntime, SQLiteStateStore
from aun_runtime.storage._sqlite_state import PENDING_LIMIT


class Notebook(AUNAgent):
    """Writes down what it is told; its state is its notes."""

    def __init__(self) -> None:
        super().__init__("takes notes")
        self.notes: list[str] = []

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        self.notes.append(message.text or "")

    async def save_state(self) -> Mapping[str, Any]:
        return {"notes": list(self.notes)}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.notes = list(state["notes"])


def _rows(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        return {f"{t}/{k}": s for t, k, s in db.execute("SELECT agent_type, agent_key, state FROM agent_states")}


async def _session(tmp_path: Path, *texts: str, evict: bool) -> list[str]:
    """One run of a runtime on the same two files: tell the notebook ``texts``, return its notes."""
    core = AUNActorRuntime(state_store=SQLiteStateStore(tmp_path / "states.sqlite"))
    runtime = AUNRuntime(core=core, archive=tmp_path / "archive.sqlite")
    await runtime.register_agent("notebook.local", Notebook)
    inbox = await runtime.open_inbox()
    await runtime.start()
    for text in texts:
        await inbox.send("notebook.local", text)
    await runtime.settle()
    notes = list((await runtime.agent_instance("notebook.local", Notebook)).notes)
    if evict:
        assert await core.evict_idle() == 1
        assert core.instances == 1  # the inbox stays
    await runtime.close()
    return notes


async def test_an_agent_resumes_from_the_file_after_a_restart(tmp_path: Path) -> None:
    assert await _session(tmp_path, "one", "two", evict=True) == ["one", "two"]
    assert _rows(tmp_path / "states.sqlite") == {"notebook.local/default": '{"notes":["one","two"]}'}
    # A new process would do the same: new runtime, new store, same files.
    assert await _session(tmp_path, "three", evict=False) == ["one", "two", "three"]


async def test_instances_still_in_memory_are_saved_when_the_runtime_closes(tmp_path: Path) -> None:
    assert await _session(tmp_path, "kept", evict=False) == ["kept"]
    assert _rows(tmp_path / "states.sqlite") == {"notebook.local/default": '{"notes":["kept"]}'}
    assert await _session(tmp_path, "and more", evict=False) == ["kept", "and more"]


def test_changes_wait_in_memory_and_go_to_the_file_together(tmp_path: Path) -> None:
    path = tmp_path / "states.sqlite"
    store = SQLiteStateStore(path)
    for n in range(PENDING_LIMIT - 1):
        store.put(AgentId("a.local", str(n)), {"n": n})
    assert _rows(path) == {}  # nothing written yet...
    assert store.peek(AgentId("a.local", "7")) == {"n": 7}  # ...yet everything is there
    store.put(AgentId("a.local", "last"), {"n": -1})
    assert len(_rows(path)) == PENDING_LIMIT  # the limit reached: one transaction for all

    assert store.take(AgentId("a.local", "7")) == {"n": 7}
    assert store.take(AgentId("a.local", "7")) is None  # taken: no longer offered...
    assert store.peek(AgentId("a.local", "7")) is None
    assert len(store) == PENDING_LIMIT - 1
    assert _rows(path)["a.local/7"] == '{"n":7}'  # ...but kept in the file, its last saved state
    store.put(AgentId("a.local", "7"), {"n": 70})  # saved again: offered again
    assert store.peek(AgentId("a.local", "7")) == {"n": 70}
    assert dict(store.items())[AgentId("a.local", "8")] == {"n": 8}
    assert len(dict(store.items())) == len(store) == PENDING_LIMIT
    store.close()
    store.close()  # idempotent


def test_a_state_that_is_not_json_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "states.sqlite")
    with pytest.raises(TypeError):
        store.put(AgentId("a.local", "default"), {"when": object()})
    assert store.peek(AgentId("a.local", "default")) is None
    store.close()


def test_the_store_can_share_the_archive_file(tmp_path: Path) -> None:
    from aun_runtime import Archive

    archive = Archive(tmp_path / "archive.sqlite")
    store = SQLiteStateStore(tmp_path / "archive.sqlite")
    archive.record_thought("a.local", "noted")
    store.put(AgentId("a.local", "default"), {"x": 1})
    store.close()
    assert [r.text for r in archive.history("a.local")] == ["noted"]
    archive.close()
    assert _rows(tmp_path / "archive.sqlite") == {"a.local/default": '{"x":1}'}


async def test_a_process_that_dies_keeps_each_agents_last_saved_state(tmp_path: Path) -> None:
    path = tmp_path / "states.sqlite"
    seed = SQLiteStateStore(path)
    seed.put(AgentId("notebook.local", "default"), {"notes": ["saved before"]})
    seed.close()
    core = AUNActorRuntime(state_store=SQLiteStateStore(path))
    runtime = AUNRuntime(core=core, archive=tmp_path / "archive.sqlite")
    await runtime.register_agent("notebook.local", Notebook)
    inbox = await runtime.open_inbox()
    await runtime.start()
    await inbox.send("notebook.local", "new, not saved yet")
    await runtime.settle()
    notebook = await runtime.agent_instance("notebook.local", Notebook)
    assert notebook.notes == ["saved before", "new, not saved yet"]
    assert core.saved_states == 0  # the state is the instance's now...
    # ...and the process dies here, without close(): the file still has the last saved state.
    assert _rows(path) == {"notebook.local/default": '{"notes":["saved before"]}'}
    await runtime.close()


def test_a_file_written_before_opens_with_its_states(tmp_path: Path) -> None:
    path = tmp_path / "states.sqlite"
    with sqlite3.connect(path) as old:  # the table exactly as earlier versions made it, with a state
        old.execute(
            "CREATE TABLE agent_states (agent_type TEXT NOT NULL, agent_key TEXT NOT NULL, state TEXT NOT NULL,"
            " PRIMARY KEY (agent_type, agent_key)) WITHOUT ROWID"
        )
        old.execute("INSERT INTO agent_states VALUES ('notebook.local', 'default', '{\"notes\":[\"old\"]}')")
    old.close()
    store = SQLiteStateStore(path)
    assert len(store) == 1
    assert store.take(AgentId("notebook.local", "default")) == {"notes": ["old"]}
    store.put(AgentId("notebook.local", "default"), {"notes": ["old", "new"]})  # replaces the row
    store.close()
    assert _rows(path) == {"notebook.local/default": '{"notes":["old","new"]}'}
