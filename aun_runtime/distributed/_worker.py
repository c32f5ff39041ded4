"""`WorkerRuntime`: autogen-ext's gRPC worker runtime, made reliable and given AUN rules.

Use it as the core of an [`AUNRuntime`][aun_runtime.AUNRuntime]; the AUN semantics (mailbox, channel,
archive, loop guard, dead letters) are the runtime's own and stay exactly as in one process. What
the worker adds under them:

* **No RPC.** `send_message` raises before anything is queued; an RPC request that reaches the
  worker anyway is answered with an error at once (the host refuses them too).
* **All contract classes serialisable from the start** (the runtime registers them).
* **Reconnect.** The link to the host reconnects after any loss and registers everything again
  (see `._link`); the worker's directory view keeps routing meanwhile.
* **A proven name.** The worker's secret (kept beside a durable archive, see `._identity`)
  goes with every call, so the host knows the worker restarted with its archive from a process
  that merely uses its name.
* **At-least-once delivery, exactly-once handling.** Direct and group messages go out as numbered
  per-recipient streams from a durable outbox and stay there until the receiving worker acknowledges
  them, which it does only after the handling and everything it caused are committed in its journal
  (see `._outbox`, `._inbound`, `._journal`).
* **Kept, not lost.** A message to an AID whose worker is away is kept until it is back; one to an
  AID nobody holds is refused as a dead letter *and* kept, and delivered if a worker registers it.
* **Service AIDs.** An AID named in `services` is registered as one instance of a service AID
  that other workers hold too; the host spreads its deliveries over the live instances as the
  policy says, and a ledger the instances share (one SQLite file per AID in `service_dir`) keeps
  each delivery handled once, also when an instance dies (see `._service_store`).
* **A real idle.** [`idle`][aun_runtime.AUNCore.idle] returns once every message this worker sent to a held AID has been
  handled by its receiver, every plain autogen-ext publish its own agents subscribe to has come
  back and been handled (see `._returning`), and nothing is being handled here.

The class itself is autogen-ext's interface and the lifecycle; each concern is a part it holds:
what it publishes (`._worker_sending`), what arrives from the host and what a commit lets it
acknowledge (`._worker_receiving`), what it registers on every session (`._worker_registration`),
what it does as sessions come and go (`._worker_link_events`), its service AIDs
(`._worker_services`) and its counters (`._worker_stats`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from autogen_core import (
    Agent,
    AgentId,
    AgentType,
    CancellationToken,
    InterventionHandler,
    Subscription,
    TopicId,
)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime
from opentelemetry.trace import TracerProvider

from ..base._errors import AgentRegistrationError, StorageSessionLostError
from ..core._actor_tracing import RuntimeTracer
from ..core._intervention import PublishInterventions
from ..core._no_rpc import RefusesRPC
from ..delivery._core_protocol import (
    MailboxProvider,
    MailboxReleasedHook,
    PublishesCopiesOneByOne,
    UndeliverableHook,
)
from ..delivery._mailbox import MailboxOptions
from ._acks import Acknowledger
from ._cloud_events import EventBuilder
from ._directory_view import DirectoryView
from ._errors import HostUnavailableError, WorkerIdentityError
from ._identity import MAX_WORKER_NAME_LENGTH, valid_worker_name, worker_secret
from ._inbound import Inbound
from ._journal import DEFAULT_COMMIT_INTERVAL, LEASE_RENEWAL, JournalArchive
from ._link import HostLink
from ._outbox import DEFAULT_OUTBOX_CAPACITY, DEFAULT_WINDOW, Outbox
from ._returning import ReturningPublishes
from ._tls import TLSConfig
from ._worker_delivery import DeliveryPath
from ._worker_link_events import LinkEvents
from ._worker_receiving import HostMessages
from ._worker_registration import WorkerRegistration
from ._worker_sending import PublishPath
from ._worker_services import ServiceInstances
from ._worker_stats import WorkerStats, count_worker, format_stats

__all__ = ["WorkerRuntime", "WorkerStats"]

logger = logging.getLogger("aun_runtime.distributed")

T = TypeVar("T", bound=Agent)


class WorkerRuntime(RefusesRPC, PublishesCopiesOneByOne, GrpcWorkerAgentRuntime):
    """A worker of a cluster whose host is [`AUNHost`][aun_runtime.distributed.AUNHost].

    It is an `AUNCore` (structurally: it has every member the
    protocol declares): it keeps its own [`archive`][aun_runtime.AUNCore.archive] (the journal is in the same file) and a
    [`directory`][aun_runtime.AUNCore.directory] of what the other workers hold; it does not drain mailboxes, takes no mailbox
    options and has nothing to [`attach`][aun_runtime.AUNCore.attach] (it records its own dead letters); its [`start`][aun_runtime.AUNCore.start]
    connects to the host and [`close`][aun_runtime.Inbox.close] stops it and releases the connection.

    Args:
        host_address: the host's `host:port`, or several hosts' comma-separated (one serves, the
            others stand by: the worker reconnects to whichever serves).
        archive: the SQLite file of this worker's archive and journal, `":memory:"`, or the
            `postgresql://` URL of the database the workers of several machines share (then `name`
            is needed; when its database session ends, nothing more is committed and
            `session_lost` is set: stop this runtime then, and start a new one on the same archive
            when the database is back, as `aun-runtime worker` does). Either
            makes the worker durable: its name, outbox and positions survive a restart, and a stop
            leaves its AIDs *away* (messages to them are kept) rather than released.
        name: the worker's name; default: the one in the archive file (made on first start). The
            host binds a name to the secret of the first worker that uses it (a durable worker's
            secret is the file `<archive>.secret`; an in-memory worker has a new one each run).
        tls: TLS settings, if the host serves TLS.
        intervention_handlers: autogen-core intervention handlers; their `on_publish` sees (and may
            change or drop) every message this worker publishes, before it leaves; a message one
            drops is a dead letter. A handler without `on_publish` is refused with
            [`InterventionHandlerError`][aun_runtime.InterventionHandlerError].
        tracer_provider: an OpenTelemetry tracer provider; spans are made only when one is given
            (autogen-core's `create`, `publish` and `process`, in its tree across workers, with
            `aun deliver` inside `process`).
        connect_timeout: seconds [`start`][aun_runtime.AUNCore.start] waits for the first connection (None: forever).
        commit_interval: seconds a change waits for its journal commit.
        window: unacknowledged messages on the wire per recipient.
        outbox_capacity: unacknowledged messages kept in all; past it a send is refused with
            [`OutboxFullError`][aun_runtime.distributed.OutboxFullError] and a dead letter.
        services: AIDs this worker holds as instances of service AIDs, each with its routing policy
            (`"round_robin"` or `"sender_affinity"`). Needs a durable `archive`.
        service_dir: where the ledgers of `services` are: a directory of SQLite ledgers
            (`<aid>.service.sqlite`) shared by the instances on one machine (default: the
            archive's directory), or, for instances on several machines, the archive's
            `postgresql://` URL (the default when the archive is in PostgreSQL).

    Raises:
        ValueError: a bad worker name, an unknown policy, or `services` with an in-memory archive.
        InterventionHandlerError: an intervention handler without `on_publish`.
    """

    def __init__(
        self,
        host_address: str,
        *,
        archive: str | Path = ":memory:",
        name: str | None = None,
        tls: TLSConfig | None = None,
        intervention_handlers: Sequence[InterventionHandler] | None = None,
        tracer_provider: TracerProvider | None = None,
        connect_timeout: float | None = 30.0,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL,
        window: int = DEFAULT_WINDOW,
        outbox_capacity: int = DEFAULT_OUTBOX_CAPACITY,
        services: Mapping[str, str] | None = None,
        service_dir: str | Path | None = None,
    ) -> None:
        # Checked first: a handler refused leaves nothing opened behind it.
        interventions = PublishInterventions(intervention_handlers) if intervention_handlers else None
        super().__init__(host_address.split(",")[0], tracer_provider=tracer_provider)
        self._services = ServiceInstances(services or {}, archive)  # checked before anything opens
        self.archive = JournalArchive(archive, commit_interval=commit_interval, worker=name)
        self.name = name or self.archive.worker_name()
        #: Set when the journal's database session ended (PostgreSQL): nothing more can be
        #: committed, so this runtime must stop (`aun-runtime worker` then rejoins with a new one).
        self.session_lost = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.archive.storage.on_lost = self._database_lost  # a server's session; a file's is never lost
        if not valid_worker_name(self.name):
            raise ValueError(
                f"worker name {self.name!r}: 1-{MAX_WORKER_NAME_LENGTH} letters, digits, '_', '-' or '.'"
            )
        self.connect_timeout = connect_timeout
        self._link = HostLink(
            host_address,
            self.name,
            tls,
            secret=self.archive.secret() or worker_secret(self.archive.path if self.archive.durable else None),
            # What the link hears goes to parts made below, from what the link gives them (it opens
            # no session before `start`). Its reader is set as its attribute: no extra call per message.
            on_message=lambda message: None,
            on_ready=lambda: self._link_events.on_ready(),
            on_lost=lambda: self._link_events.on_lost(),
            on_refused=lambda error: self._link_events.on_refused(error),
        )
        self.directory = DirectoryView(self._link.directory_call, lambda aid: self._link_events.on_held(aid))
        self._outbox = Outbox(
            self.archive, self._link.send, self.directory.aid_status, window=window, capacity=outbox_capacity
        )
        self._outbox.load()
        self._inbound = Inbound(self.archive)
        self._acks = Acknowledger(self.name, self._link.send, lambda: self._outbox.connected)
        tracer = tracer_provider.get_tracer("aun_runtime.distributed") if tracer_provider else None
        runtime_tracer = RuntimeTracer(tracer_provider, type(self).__name__) if tracer_provider else None
        self._returning = ReturningPublishes()
        # The delivery path is given what it uses (autogen-ext's registry, subscriptions and agent
        # factory among them) as objects and bound methods: it reads nothing of the worker.
        self._deliveries = DeliveryPath(
            self.name,
            self.archive,
            self._outbox,
            self._inbound,
            deserialize=self._serialization_registry.deserialize,
            subscribers=self._subscription_manager.get_subscribed_recipients,
            get_agent=self._get_agent,
            tracer=tracer,
            runtime_tracer=runtime_tracer,
            serializers=self._serialization_registry,
            changed=self._changed,
            abandoned=self._services.abandoned,
        )
        self._sending = PublishPath(
            self.archive,
            self._outbox,
            EventBuilder(self.name, self._serialization_registry, traced=tracer_provider is not None),
            send=self._link.send,
            returning=self._returning,
            subscribers=self._subscription_manager.get_subscribed_recipients,
            held=self._agent_factories,
            tracer=runtime_tracer,
            interventions=interventions,
        )
        self._receiving = HostMessages(
            self.name,
            self._agent_factories,
            directory=self.directory,
            outbox=self._outbox,
            inbound=self._inbound,
            services=self._services,
            deliveries=self._deliveries,
            acks=self._acks,
            returning=self._returning,
            send=self._link.send,
            changed=self._changed,
        )
        self._link.on_message = self._receiving.on_message
        self._services.open(
            service_dir, instance=self.name, journal=self.archive, acks=self._acks, spawn=self._receiving.spawn_service
        )
        self.archive.on_commit = self._receiving.on_commit
        self.archive.busy = lambda: self._deliveries.busy > 0
        self._registration = WorkerRegistration(self.name, self._link, self.directory, self._services)
        self._link_events = LinkEvents(
            self.name,
            self._link,
            self.directory,
            self._registration,
            outbox=self._outbox,
            acks=self._acks,
            returning=self._returning,
            changed=self._changed,
        )
        self._progress = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None

    def _database_lost(self, error: BaseException) -> None:
        # Called from the database session's thread.
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.session_lost.set)

    # -- what the facade needs of its core (AUNCore) ------------------------------------------------

    @property
    def drains_mailboxes(self) -> bool:
        """False: the facade applies each AID's mailbox at delivery."""
        return False

    @property
    def mailbox_options(self) -> MailboxOptions | None:
        """None: a worker takes no mailbox options (the facade's own apply)."""
        return None

    def attach(
        self,
        *,
        mailbox_provider: MailboxProvider | None = None,
        on_undeliverable: UndeliverableHook | None = None,
        on_mailbox_released: MailboxReleasedHook | None = None,
    ) -> None:
        """Hear about messages an intervention handler dropped (the facade applies the mailboxes, and
        the worker records what it could not deliver as dead letters in its archive itself)."""
        self._sending.on_undeliverable = on_undeliverable

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the host, register everything, and keep the connection up until stopped.

        It first collects garbage and freezes what the process holds by then (`gc.freeze()`, for the
        whole process): objects alive at start are never scanned again, so no later full collection
        stalls deliveries, and they are never collected either, even if they become cycles later.

        Raises:
            HostUnavailableError: no connection within `connect_timeout`.
            AgentRegistrationError: an AID is held by another worker.
            WorkerIdentityError: the host knows this worker's name with another secret.
        """
        if self._running:
            raise RuntimeError("the worker is already running")
        self._running = True
        self._loop = asyncio.get_running_loop()
        # What the process holds by now (modules, the app, its agents) lives as long as the worker.
        # A full collection scans all of it, 15-35 ms during which no message moves: frozen, it is
        # never scanned again (a paced message's p99 was mostly these pauses).
        gc.collect()
        gc.freeze()
        self._receiving.closing = False  # started again after a stop: deliveries are handled again
        self._link.start()
        self._timer = asyncio.get_running_loop().create_task(self._tick())
        await self._link_events.first_session(self.connect_timeout)
        if not self._link.connected:
            await self._shutdown(leave=False)
            error = self._link_events.start_error()
            if isinstance(error, AgentRegistrationError | WorkerIdentityError):
                raise error
            raise HostUnavailableError(
                f"no host at {self._link.address} within {self.connect_timeout:g} s"
                + (f" ({error})" if error else "")
            ) from None

    async def stop(self) -> None:
        """Stop now. A durable worker's AIDs become *away* (kept for); an in-memory one leaves."""
        if not self._running:
            raise RuntimeError("the worker is not running")
        await self._shutdown(leave=not self.archive.durable)

    async def stop_when_idle(self) -> None:
        await self.idle()
        await self.stop()

    async def close(self) -> None:
        """Stop if running and release the connection to the host. Idempotent.

        The archive stays open: whoever runs the worker closes it (an
        [`AUNRuntime`][aun_runtime.AUNRuntime] over it does, in its own `close`).
        """
        if self._running:
            await self.stop()
        await self._link.close()
        self._services.close()

    async def _shutdown(self, *, leave: bool) -> None:
        self._running = False
        self._receiving.closing = True  # from now on nothing new is handed to an agent: it is sent again later
        if self._timer is not None:
            self._timer.cancel()
        await self._deliveries.cancel()
        try:
            self.archive.flush()
            self._services.settle()
        except StorageSessionLostError as exc:
            # Nothing more can be committed, and need not be: what was not is sent again by its
            # senders, and the claims are settled by whoever next holds this worker's lock. The
            # link is still closed below, so that a worker that rejoins is the only one the host sees.
            logger.warning("worker %s: stopping without its last commit: %s", self.name, exc)
        if self._acks.pending:  # what was handled is acknowledged before the link goes
            self._acks.flush()
        if leave and self._link.connected:
            try:
                await self._link.directory_call("Leave", {"groups": sorted(self.directory.held_groups)})
            except HostUnavailableError:
                logger.warning("worker %s: could not tell the host it leaves", self.name)
        await self._link.close()
        self._outbox.connected = False
        logger.info("worker %s: stopped (%s)", self.name, "left" if leave else "its AIDs are away")

    async def idle(self) -> None:
        """Wait until nothing is being handled here and every message sent to a held AID was handled."""
        while True:
            if self._is_idle():
                return
            self._progress.clear()
            self.archive.request_commit()
            await self._progress.wait()

    def _is_idle(self) -> bool:
        return (
            not self._deliveries.busy
            and not self.archive.pending_commit
            and not self._acks.pending
            and self._outbox.settled()
            and not self._returning
        )

    def _changed(self) -> None:
        self._progress.set()

    @property
    def stats(self) -> WorkerStats:
        return count_worker(self._link, self._outbox, self._inbound, self._deliveries, self._services)

    def stats_line(self) -> str:
        return format_stats(self.stats)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(LEASE_RENEWAL)
            # Renewed here, on the loop the agents run on: a worker whose loop stands still (frozen,
            # or a handler that blocks it) lets its lease run out, and its claims pass to others.
            with contextlib.suppress(StorageSessionLostError):  # its end is told through `session_lost`
                self.archive.renew_lease()
            self._outbox.check_timeouts()
            if self._returning.expire(asyncio.get_running_loop().time()):
                self._changed()
            self._services.mark()  # what a busy ledger refused last time

    # -- what it holds ----------------------------------------------------------------------------

    def held_aids(self) -> list[str]:
        """The AIDs this worker has registered with the host (its own internal agents left out)."""
        return self._registration.held_aids()

    def log_registered(self) -> None:
        """Log one line with the AIDs this worker holds."""
        self._registration.log_held()

    # -- registration ------------------------------------------------------------------------------

    async def register_factory(
        self,
        type: str | AgentType,
        agent_factory: Callable[[], T | Awaitable[T]],
        *,
        expected_class: type[T] | None = None,
    ) -> AgentType:
        agent_type = type if isinstance(type, AgentType) else AgentType(type)
        if agent_type.type in self._agent_factories:
            raise ValueError(f"Agent with type {agent_type.type} already exists.")

        async def make() -> T:
            made = agent_factory()
            return await made if isinstance(made, Awaitable) else made

        self._agent_factories[agent_type.type] = make
        await self._registration.add_type(agent_type.type)
        return agent_type

    async def _register_agent_type(self, agent_type: str) -> None:
        await self._registration.add_type(agent_type)

    async def add_subscription(self, subscription: Subscription) -> None:
        await self._subscription_manager.add_subscription(subscription)
        await self._registration.add_subscription(subscription)

    async def remove_subscription(self, id: str) -> None:
        await self._subscription_manager.remove_subscription(id)
        await self._registration.remove_subscription(id)

    # -- sending -----------------------------------------------------------------------------------

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> None:
        """Publish. On `aun.inbox.<aid>` it goes through the outbox (kept until acknowledged);
        anything else is an autogen-ext publish (best effort, as autogen-ext does it). The
        intervention handlers see it first, here: a message they drop never leaves."""
        message_id = message_id or str(uuid.uuid4())
        if self._sending.plain:
            await self._sending.send(message, topic_id, sender, message_id)
        else:
            await self._sending.publish(message, topic_id, sender, cancellation_token, message_id)

    # -- unsupported on a worker -------------------------------------------------------------------

    async def save_state(self) -> Mapping[str, Any]:
        raise NotImplementedError("a worker's state is its archive file; there is no save_state")

    async def load_state(self, state: Mapping[str, Any]) -> None:
        raise NotImplementedError("a worker's state is its archive file; there is no load_state")
