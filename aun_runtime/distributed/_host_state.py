"""The host's state file: who owns what, kept across a host restart.

Without it the host keeps worker names, AID ownership and service AIDs in memory, and after a
restart the first connection to claim a name or an AID gets it. With it (`AUNHost(state=...)`,
`aun-runtime host --state FILE`) the host writes down, whenever one of them changes:

* each worker name and the SHA-256 digest of the secret it is bound to (never the secret);
* each AID and the worker that owns it;
* each service AID: its policy, the digest of its instances' secret, and which workers are its
  instances;
* each group: the worker that holds it, its dispatch mode and its members.

A restarted host reads it back with everything *away* (no worker is connected yet), so every name,
AID and service stays bound to its owner's secret, and the owners take them back as they reconnect.
What is live (connections, subscriptions, routing turns) is not kept: the workers bring it back.

The file is JSON, mode 0600, replaced whole (written under a temporary name, flushed to disk, then
renamed over the old one), so a crash leaves the old state or the new, never half of one. A change
is written before the host answers the call that made it; changes that arrive while a write is
under way are written together by the next one. Two hosts never share one file: a host holds a
lock on `<state>.lock` while it runs, and another host given the same file refuses to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from stat import S_ISBLK, S_ISCHR, S_ISDIR, S_ISFIFO, S_ISREG, S_ISSOCK
from typing import Any, Protocol

from ._errors import HostStateError

__all__ = ["MAX_STATE_BYTES", "STATE_FORMAT", "HostState", "HostStateFile", "empty_state", "lock_path"]

#: The version of the file's layout; a file of another version is refused, not guessed at.
STATE_FORMAT = 1
#: Bytes a state file may hold, and the most that is ever read of one: a larger file is refused as
#: no state file. The host writes about 150 bytes per AID, worker or group member it keeps: room for
#: more than a million of them.
MAX_STATE_BYTES = 256 * 1024 * 1024
_SECTIONS = ("workers", "aids", "services", "groups")

Snapshot = dict[str, Any]


def empty_state() -> Snapshot:
    """The state of a host that knows nobody yet: every section empty."""
    return {section: {} for section in _SECTIONS}


class HostState(Protocol):
    """Where a host keeps its state: a file (`HostStateFile`) or the shared database
    (`._host_election.ElectedHostState`)."""

    given: str
    loaded: Snapshot

    @property
    def path(self) -> Path | str:
        """Where the state is, as shown in messages."""
        ...

    async def save(self, snapshot: Callable[[], Snapshot]) -> None:
        """Keep what `snapshot()` gives; return once it is kept."""
        ...

    def close(self) -> None:
        """Let go of the state (another host may use it from now on)."""
        ...


def _kind(mode: int) -> str:
    kinds = ((S_ISDIR, "a directory"), (S_ISCHR, "a character device"), (S_ISBLK, "a block device"),
             (S_ISFIFO, "a FIFO"), (S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "something else")


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


class HostStateFile:
    """One host's state file, locked for as long as the host runs.

    Args:
        path: the file (made on first write; its directory is made too).

    Raises:
        HostStateError: another host holds the file, or it is not a state file this host reads.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: The path as the host was given it (how an error names the setting it came from).
        self.given = str(path)
        self._refuse_unless_file(os.stat)  # before anything is made: no lock file beside a device
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(lock_path(self.path), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise HostStateError(f"cannot keep a host state file at {self.path}: {exc}", value=self.given) from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise HostStateError(
                f"{self.path} is the state file of another host that is running: each host keeps a state file of its own",
                value=self.given,
            ) from None
        self._lock: int | None = descriptor
        self._written: Snapshot | None = None
        self._requested = 0  # saves asked for
        self._done = 0  # saves covered by a finished write
        self._writer: asyncio.Task[None] | None = None
        self._snapshot: Callable[[], Snapshot] | None = None
        try:
            self.loaded = self._load()
        except BaseException:
            self.close()
            raise

    def _refuse_unless_file(self, stat: Callable[[Any], os.stat_result], opened: int | str | None = None) -> None:
        """Refuse a path that is something else than a regular file of at most `MAX_STATE_BYTES`
        (a directory, a device, a FIFO, a huge file): such a thing is never read, nor written."""
        try:
            info = stat(self.path if opened is None else opened)
        except FileNotFoundError:
            return  # made on the first write
        except OSError as exc:
            raise HostStateError(f"cannot use {self.path} as the host's state file: {exc}", value=self.given) from None
        if not S_ISREG(info.st_mode):
            raise HostStateError(
                f"{self.path} is {_kind(info.st_mode)}, not a regular file: give the path of the host's state file"
                " (made on its first write)",
                value=self.given,
            )
        if info.st_size > MAX_STATE_BYTES:
            raise self._too_large(info.st_size)

    def _too_large(self, size: int) -> HostStateError:
        return HostStateError(
            f"{self.path} holds {size} bytes, more than a host state file may (MAX_STATE_BYTES, {MAX_STATE_BYTES}"
            " bytes): give the path of the host's state file",
            value=self.given,
        )

    def _load(self) -> Snapshot:
        """What the file holds (every section empty if there is no file yet)."""
        try:
            # Non-blocking: a FIFO put there since the look above is never waited on.
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return empty_state()
        except OSError as exc:
            raise HostStateError(f"cannot read the host's state file {self.path}: {exc}", value=self.given) from None
        with os.fdopen(descriptor, "rb") as file:
            self._refuse_unless_file(os.fstat, file.fileno())
            data = file.read(MAX_STATE_BYTES + 1)
        if len(data) > MAX_STATE_BYTES:  # it grew since the look: still never read past the bound
            raise self._too_large(len(data))
        try:
            state = json.loads(data)
        except ValueError as exc:
            raise HostStateError(f"{self.path} is not a host state file (not JSON: {exc})", value=self.given) from None
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise HostStateError(f"{self.path} is not a host state file of format {STATE_FORMAT}", value=self.given)
        if not all(isinstance(state.get(section), dict) for section in _SECTIONS):
            raise HostStateError(f"{self.path} lacks one of its sections ({', '.join(_SECTIONS)})", value=self.given)
        self._written = {section: state[section] for section in _SECTIONS}
        return self._written

    async def save(self, snapshot: Callable[[], Snapshot]) -> None:
        """Write what `snapshot()` gives, and return once it is on disk.

        `snapshot` is called when the write starts, so one write covers every change made before
        it; a save asked for during a write waits for the next one. Nothing is written when the
        state is what the file already holds.

        Raises:
            HostStateError: the file could not be written (the state stays as it was on disk).
        """
        self._snapshot = snapshot
        self._requested += 1
        wanted = self._requested
        while self._done < wanted:
            if self._writer is None:
                self._writer = asyncio.get_running_loop().create_task(self._write())
            writer = self._writer
            await asyncio.shield(writer)

    async def _write(self) -> None:
        covers = self._requested
        try:
            assert self._snapshot is not None
            state = self._snapshot()
            if state != self._written:
                await asyncio.to_thread(_replace, self.path, {"format": STATE_FORMAT, **state})
                self._written = state
        except OSError as exc:
            raise HostStateError(f"the host could not write its state file {self.path}: {exc}") from exc
        finally:
            self._writer = None
        self._done = covers

    def close(self) -> None:
        """Let go of the file's lock (another host may use it from now on)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _replace(path: Path, state: Snapshot) -> None:
    """Write `state` to `path` whole: a reader, or a crash, sees the old file or the new one."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            json.dump(state, file, sort_keys=True, separators=(",", ":"))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)
