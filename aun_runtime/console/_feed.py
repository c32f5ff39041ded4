"""`ArchiveFeed`: follows an archive as it grows and tells the console's pages when it has.

One feed per console, whatever the number of open pages. The feed does the polling: each tick it
asks the archive for its newest id (one indexed query), and when that moved it wakes every page.
Each page then reads, from the archive, only the records after its own cursor (the id of the last
record it was sent), a page at a time. So

* nothing is sent twice and nothing is skipped, across reconnects too (the browser's
  `Last-Event-ID` *is* the cursor);
* a slow page holds no queue in memory here: it is simply further behind in the archive and catches
  up when its socket drains; there is no buffer to overflow;
* the whole archive is never re-read or re-sent per tick.

The archive is opened lazily: a console pointed at a file that no runtime has created yet waits for
it, and says so, instead of failing; pointed at a PostgreSQL archive (the database the workers of
several machines share, every worker's messages in one place), it waits the same way for a server
that is not up yet, and when its database goes away (a restart, a crash) it opens it again with
backoff, saying so once each way (`aun_runtime.transcripts._reconnect`); each page goes on from its own cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import asdict

from ..base._agent_md import AgentMDError, parse_agent_md
from ..base._errors import StorageUnavailableError
from ..base._waiting import wait_set
from ..storage import dialect_for, is_missing_table
from ..storage._archive import AgentEntry, Archive, ArchiveRow
from ..transcripts._reconnect import Reconnection, is_connection_lost

__all__ = ["DEFAULT_POLL_INTERVAL", "PAGE_SIZE", "ArchiveFeed", "encode_record"]

logger = logging.getLogger("aun_runtime.console")

#: Seconds between two looks at the archive. The runtime writes its batches every 50 ms at most,
#: so 0.1 s keeps a page within a blink of the runtime at one cheap query per tick.
DEFAULT_POLL_INTERVAL = 0.1
#: Records per read and per event sent to a page: a bound on the memory one page costs per step,
#: and large enough that a page catching up on a long archive needs few round trips.
PAGE_SIZE = 500


def encode_record(row: ArchiveRow) -> str:
    """One archive record as the console's JSON: its fields, and the message as the archive holds it."""
    fields = {
        "id": row.id,
        "owner": row.owner,
        "kind": row.kind,
        "reason": row.reason,
        "recorded_at": row.recorded_at,
        "about": row.about,
        # A message carries its own text; a thought or a message-less event has only this.
        "text": None if row.is_message else row.body,
    }
    head = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    # The message's JSON is spliced in as the runtime stored it: never parsed, never re-encoded.
    return f'{head[:-1]},"message":{row.body if row.is_message else "null"}}}'


def encode_records(records: list[ArchiveRow]) -> str:
    """A JSON array of `encode_record` items."""
    return "[" + ",".join(encode_record(record) for record in records) + "]"


def encode_agents(entries: list[AgentEntry]) -> str:
    """The agents table as JSON, each agent.md card also parsed into its fields for the page."""
    items = []
    for entry in entries:
        item: dict[str, object] = asdict(entry)
        if entry.card:
            try:
                card = parse_agent_md(entry.card)
            except AgentMDError as exc:  # a foreign archive may hold anything: show it, say why
                item["card_error"] = str(exc)
            else:
                item["card_fields"] = {
                    "name": card.name,
                    "type": card.type,
                    "version": card.version,
                    "description": card.description,
                    "tags": list(card.tags),
                    "body": card.body,
                }
        items.append(item)
    return json.dumps(items, ensure_ascii=False, default=str)


class ArchiveFeed:
    """Polls one archive and wakes the pages that follow it.

    Args:
        opener: returns the archive to follow; called until it succeeds (a file may not exist yet).
        poll_interval: seconds between two looks at the archive.
    """

    def __init__(
        self, opener: Callable[[], Archive], *, poll_interval: float = DEFAULT_POLL_INTERVAL
    ) -> None:
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        self._opener = opener
        self.poll_interval = poll_interval
        self.archive: Archive | None = None
        #: The newest record id seen in the archive.
        self.head = 0
        #: ``waiting`` (no archive yet), ``live``, ``closed`` (the archive was closed under us) or
        #: ``error`` (the file is not an archive).
        self.state = "waiting"
        self.detail = ""
        #: The agents table as JSON, and a counter that moves whenever it changes.
        self.agents_json = "[]"
        self.agents_version = 0
        self._agents: list[AgentEntry] = []
        self._changed = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._reconnection = Reconnection("", logger.warning)  # named once the archive is open

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Look once now, then keep looking every `poll_interval` seconds."""
        self.tick()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="aun:console-feed")

    async def close(self) -> None:
        """Stop polling and release every page waiting on the feed."""
        self._closed = True
        self._wake()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def closed(self) -> bool:
        return self._closed

    async def _run(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.poll_interval)
            self.tick()

    # -- polling -----------------------------------------------------------------------------------

    def tick(self) -> None:
        """Look at the archive once; wake the pages if anything moved."""
        archive = self._open()
        if archive is None:
            return
        try:
            head = archive.last_id()
            agents = archive.agents()
        except sqlite3.ProgrammingError as exc:  # the runtime closed its archive
            self._set_state("closed", f"the archive was closed: {exc}")
            return
        except sqlite3.OperationalError as exc:  # a file whose writer has not created the tables yet
            self._set_state("waiting", f"{archive.shown}: {exc}")
            return
        except sqlite3.DatabaseError as exc:  # not an archive at all: say so, and keep looking
            self._set_state("error", f"{archive.shown} cannot be read as an archive: {exc}")
            return
        except Exception as exc:
            if is_connection_lost(exc):  # the PostgreSQL server went away: open it again, with backoff
                self._lost(archive, exc)
                return
            if not is_missing_table(exc):
                raise
            self._set_state("waiting", f"{archive.shown}: no runtime has written it yet ({exc})")
            return
        moved = self._set_state("live", "")
        if agents != self._agents:  # encoded (and cards parsed) only when the table changed
            self._agents = agents
            self.agents_json = encode_agents(agents)
            self.agents_version += 1
            moved = True
        if head != self.head:
            self.head = head
            moved = True
        if moved:
            self._wake()

    def _open(self) -> Archive | None:
        if self.archive is None:
            if self._reconnection.wait() > 0:
                return None
            try:
                self.archive = self._opener()
            except StorageUnavailableError as exc:
                if exc.value is not None and not dialect_for(exc.value).shared:  # a file that is no archive: keep looking
                    self._set_state("error", f"{exc.value} cannot be read as an archive: {exc}")
                    return None
                if self._reconnection.down_since is not None:  # no server, yet or still
                    self._reconnection.lost(exc)  # still away: wait longer before the next attempt
                self._set_state("waiting", str(exc))
                return None
            except FileNotFoundError as exc:  # no file yet
                self._set_state("waiting", str(exc))
                return None
            self._reconnection.what = self.archive.shown
            self._reconnection.back(f"pages go on after the last record each was sent (the newest record id seen: {self.head})")
        return self.archive

    def _lost(self, archive: Archive, error: BaseException) -> None:
        self.archive = None
        self._reconnection.lost(error)
        with contextlib.suppress(Exception):  # its session is gone: this lets go of what is left of it
            archive.close()
        self._set_state("waiting", str(error))

    def _set_state(self, state: str, detail: str) -> bool:
        if (state, detail) == (self.state, self.detail):
            return False
        if state != "live":
            logger.info("console feed %s: %s", state, detail)
        self.state, self.detail = state, detail
        self._wake()
        return True

    def _wake(self) -> None:
        # Every waiting page holds the current event; a fresh one serves the next round.
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        """Return when the feed moves (new records, agents or state), is closed, or after `timeout`."""
        if self._closed:
            return
        await wait_set(self._changed, timeout)

    # -- reading -----------------------------------------------------------------------------------

    def read(self, after_id: int, limit: int = PAGE_SIZE) -> list[ArchiveRow]:
        """The first `limit` records after `after_id`, oldest first (none while there is no archive)."""
        archive = self.archive
        if archive is None or self.state == "closed":
            return []
        try:
            return archive.rows_after(after_id, limit=limit)
        except sqlite3.DatabaseError:
            return []  # no tables yet, or not an archive: the feed's state says which
        except Exception as exc:
            if not (is_missing_table(exc) or is_connection_lost(exc)):  # a lost server: the feed opens it again
                raise
            return []
