"""What a worker does as its link's sessions come and go: registers again, resumes, marks the host away.

Apart from the worker because it is the one part that reacts to the link (`._link`) rather than to
messages: a session that has its snapshot registers everything again and resumes the outbox and
the acknowledgements held back; a session lost marks every AID away until the next; a refused
identity is the caller's to fix at start and only logged later; an AID held again gets what was
kept for it. At start, `first_session` is what `WorkerRuntime.start` waits on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc

from ..base._errors import AgentRegistrationError
from ._acks import Acknowledger
from ._directory_view import DirectoryView
from ._errors import WorkerIdentityError
from ._link import HostLink
from ._outbox import Outbox
from ._returning import ReturningPublishes
from ._worker_registration import WorkerRegistration

__all__ = ["LinkEvents"]

logger = logging.getLogger("aun_runtime.distributed")


class LinkEvents:
    """The worker's listener of its link (`on_ready`, `on_lost`, `on_refused`) and of AIDs held again (`on_held`).

    Args:
        worker: the worker's name (for the log).
        link: the link to the host.
        directory: the worker's view of the directory.
        registration: what the worker registers with each session.
        outbox: paused while no session is up, resumed with the next.
        acks: acknowledgements held back while no session is up.
        returning: the plain publishes a lost session will not bring back.
        changed: called whenever something `idle` waits on moved.
    """

    def __init__(
        self,
        worker: str,
        link: HostLink,
        directory: DirectoryView,
        registration: WorkerRegistration,
        *,
        outbox: Outbox,
        acks: Acknowledger,
        returning: ReturningPublishes,
        changed: Callable[[], None],
    ) -> None:
        self._worker = worker
        self._link = link
        self._directory = directory
        self._registration = registration
        self._outbox = outbox
        self._acks = acks
        self._returning = returning
        self._changed = changed
        self._started = False  # a first session was ready: what goes wrong later is logged, not raised
        self._ready_error: BaseException | None = None
        self._refused = asyncio.Event()
        self._identity_refused = False

    async def first_session(self, timeout: float | None) -> None:
        """Wait up to `timeout` seconds for the link's first session (the link started), or for a refusal."""
        refused = asyncio.ensure_future(self._refused.wait())
        connected = asyncio.ensure_future(self._link.wait_connected(None))
        try:
            await asyncio.wait([refused, connected], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            refused.cancel()
            connected.cancel()

    def start_error(self) -> BaseException | None:
        """Why the first session did not come up: a refusal at start, or the link's last error, if any."""
        return self._ready_error or self._link.last_error

    async def on_ready(self) -> None:
        """A session has its snapshot: register what this worker holds, then resume the streams."""
        try:
            await self._registration.register_all(started=self._started)
        except AgentRegistrationError as exc:  # at start, a conflict is the caller's to fix
            self._ready_error = exc
            self._refused.set()
            raise
        await self._directory.announce()
        self._directory.online = True
        self._started = True
        if self._registration.held_aids():  # a worker started before its app registers anything says so later
            self._registration.log_held()
        self._outbox.connected = True
        self._identity_refused = False
        if self._acks.pending:  # what was handled while the link was down
            self._acks.flush()
        self._outbox.restart()
        self._changed()

    def on_refused(self, error: grpc.aio.AioRpcError) -> None:
        refusal = WorkerIdentityError(f"the host at {self._link.address} refused worker {self._worker}: {error.details()}")
        if not self._started:  # at start, it is the caller's to fix
            self._ready_error = refusal
            self._refused.set()
        elif not self._identity_refused:
            self._identity_refused = True
            logger.error("worker %s: %s; it keeps trying", self._worker, refusal)

    def on_lost(self) -> None:
        self._returning.lost()  # best effort: what was on the link will not come back
        self._outbox.connected = False
        self._directory.online = False
        self._directory.mark_all_away()
        logger.warning("worker %s: lost the host at %s", self._worker, self._link.address)
        self._changed()

    def on_held(self, aid: str) -> None:
        """`aid` is held again (by this worker or another): what was kept for it goes out."""
        kept = self._outbox.kept().get(aid, 0)
        if kept:
            logger.info("worker %s: %s is held again; delivering %d kept messages", self._worker, aid, kept)
        self._outbox.restart(aid)
        self._changed()
