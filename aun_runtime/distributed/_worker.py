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
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from autogen_core import (
    Agent,
    AgentId,
    AgentType,
    CancellationToken,
    InterventionHandler,
    MessageContext,
    Subscription,
    TopicId,
    TypeSubscription,
)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2
from opentelemetry.trace import TracerProvider

from protocols.aun import AUNMessage

from .._actor_tracing import RuntimeTracer
from .._archive import RecordKind
from .._core_protocol import MailboxProvider, MailboxReleasedHook, PublishesCopiesOneByOne, UndeliverableHook
from .._errors import (
    AgentRegistrationError,
    MessageDroppedError,
    OutboxFullError,
    RPCForbiddenError,
    StorageSessionLostError,
)
from .._intervention import PublishInterventions, begin_publish, detached
from .._mailbox import MailboxOptions
from .._no_rpc import RefusesRPC
from .._topics import INBOX_PREFIX
from ._acks import Acknowledger
from ._delivery import DeliveryPath
from ._directory_view import DirectoryView
from ._errors import HostUnavailableError, WorkerIdentityError
from ._events import EventBuilder
from ._identity import MAX_WORKER_NAME_LENGTH, valid_worker_name, worker_secret
from ._inbound import Inbound
from ._journal import DEFAULT_COMMIT_INTERVAL, DELIVERY, LEASE_RENEWAL, Commit, Delivery, JournalArchive
from ._link import HostLink
from ._outbox import DEFAULT_OUTBOX_CAPACITY, DEFAULT_WINDOW, Outbox
from ._returning import ReturningPublishes
from ._service_inbound import ServiceInbound
from ._service_routing import SERVICE_METADATA, SERVICE_SECRET_METADATA
from ._service_store import POLICIES, open_ledger
from ._tls import TLSConfig
from ._wire import (
    ACK_PREFIX,
    AUN_PREFIX,
    BASE_ATTR,
    DIRECTORY_TYPE,
    ORIGIN_ATTR,
    SEQ_ATTR,
    WORKER_AGENT_PREFIX,
    event_json,
)

__all__ = ["WorkerRuntime", "WorkerStats"]

logger = logging.getLogger("aun_runtime.distributed")

T = TypeVar("T", bound=Agent)
#: Seconds a registration waits for the host to let go of the same AID held by a connection that
#: is closing (a worker just stopped, or killed and restarted).
REGISTRATION_WAIT = 10.0


@dataclass
class WorkerStats:
    """What the worker did, counted. `kept` is what waits for AIDs nobody holds now."""

    connected: bool = False
    sessions: int = 0
    reconnects: int = 0
    sent: int = 0
    resent: int = 0
    acknowledged: int = 0
    handled: int = 0
    duplicates_skipped: int = 0
    reordered: int = 0
    unacknowledged: int = 0
    kept: int = 0


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
        policies = dict(services or {})
        for aid, policy in policies.items():
            if policy not in POLICIES:
                raise ValueError(f"service {aid}: unknown policy {policy!r}; one of {', '.join(POLICIES)}")
        if policies and str(archive) == ":memory:":
            raise ValueError("a service instance needs a durable archive: its journal proves what it handled")
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
        self._policies = policies
        self.connect_timeout = connect_timeout
        self._link = HostLink(
            host_address,
            self.name,
            tls,
            secret=self.archive.secret() or worker_secret(self.archive.path if self.archive.durable else None),
            on_message=self._on_host_message,
            on_ready=self._on_ready,
            on_lost=self._on_lost,
            on_refused=self._on_refused,
        )
        self.directory = DirectoryView(self._link.directory_call, self._on_held)
        self._outbox = Outbox(
            self.archive, self._link.send, self.directory.aid_status, window=window, capacity=outbox_capacity
        )
        self._outbox.load()
        self._inbound = Inbound(self.archive)
        self._events = EventBuilder(self.name, self._serialization_registry, traced=tracer_provider is not None)
        self._acks = Acknowledger(self.name, self._link.send, lambda: self._outbox.connected)
        tracer = tracer_provider.get_tracer("aun_runtime.distributed") if tracer_provider else None
        self._tracer = RuntimeTracer(tracer_provider, type(self).__name__) if tracer_provider else None
        self._interventions = interventions
        self._on_undeliverable: UndeliverableHook | None = None
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
            runtime_tracer=self._tracer,
            serializers=self._serialization_registry,
            changed=self._changed,
            abandoned=self._abandoned,
        )
        self._services = {aid: self._open_service(service_dir, aid, policy) for aid, policy in policies.items()}
        self.archive.on_commit = self._on_commit
        self.archive.busy = lambda: self._deliveries.busy > 0
        self._types: list[str] = [WORKER_AGENT_PREFIX + self.name]
        self._subscriptions: list[Subscription] = [
            TypeSubscription(ACK_PREFIX + self.name, WORKER_AGENT_PREFIX + self.name)
        ]
        self._progress = asyncio.Event()
        self._ready_error: BaseException | None = None
        self._refused = asyncio.Event()
        self._closing = False
        self._started = False
        self._identity_refused = False
        self._timer: asyncio.Task[None] | None = None

    def _open_service(self, location: str | Path | None, aid: str, policy: str) -> ServiceInbound:
        ledger = open_ledger(location, aid=aid, instance=self.name, journal=self.archive)
        return ServiceInbound(aid, ledger, policy, spawn=self._spawn_service, ack=self._ack_service)

    def _database_lost(self, error: BaseException) -> None:
        # Called from the database session's thread.
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.session_lost.set)

    def _spawn_service(self, origin: str, aid: str, seq: int, event: Any) -> None:
        if self._closing:  # claimed as the worker began to stop: its claim is settled on the way out
            self._services[aid].abandoned(origin, seq)
            return
        self._deliveries.spawn(Delivery(origin, aid, seq, service=True), event)

    def _ack_service(self, origin: str, aid: str, through: int) -> None:
        self._acks.due({origin: {aid: through}})
        self.archive.forget_service_handled(origin, aid, through)

    def _abandoned(self, scope: Delivery) -> None:
        service = self._services.get(scope.aid) if scope.service else None
        if service is not None:
            service.abandoned(scope.origin, scope.seq)

    def _settle_services(self) -> None:
        """Nothing is in flight: settle this instance's open claims in each service ledger."""
        for aid, service in self._services.items():
            service.mark()
            service.ledger.settle(lambda origin, seq, aid=aid: self.archive.service_handled(origin, aid, seq))  # type: ignore[misc]

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
        self._on_undeliverable = on_undeliverable

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
        self._closing = False  # started again after a stop: deliveries are handled again
        self._link.start()
        self._timer = asyncio.get_running_loop().create_task(self._tick())
        refused = asyncio.ensure_future(self._refused.wait())
        connected = asyncio.ensure_future(self._link.wait_connected(None))
        try:
            await asyncio.wait([refused, connected], timeout=self.connect_timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            refused.cancel()
            connected.cancel()
        if not self._link.connected:
            await self._shutdown(leave=False)
            error = self._ready_error or self._link.last_error
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
        for service in self._services.values():
            service.ledger.close()

    async def _shutdown(self, *, leave: bool) -> None:
        self._running = False
        self._closing = True  # from now on nothing new is handed to an agent: it is sent again later
        if self._timer is not None:
            self._timer.cancel()
        await self._deliveries.cancel()
        try:
            self.archive.flush()
            self._settle_services()
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
        outbox, inbound = self._outbox, self._inbound
        return WorkerStats(
            connected=self._link.connected,
            sessions=self._link.sessions,
            reconnects=self._link.reconnects,
            sent=outbox.sent,
            resent=outbox.resent,
            acknowledged=outbox.acked,
            handled=self._deliveries.handled,
            duplicates_skipped=inbound.duplicates + sum(s.duplicates for s in self._services.values()),
            reordered=inbound.reordered,
            unacknowledged=outbox.size,
            kept=sum(outbox.kept().values()),
        )

    def stats_line(self) -> str:
        return " ".join(f"{k}={v}" for k, v in asdict(self.stats).items())

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
            for service in self._services.values():
                service.mark()  # what a busy ledger refused last time

    # -- connection events -------------------------------------------------------------------------

    async def _on_ready(self) -> None:
        """A session has its snapshot: register what this worker holds, then resume the streams."""
        lost: set[str] = set()
        for agent_type in list(self._types):
            try:
                await self._register_with_host(agent_type)
            except AgentRegistrationError as exc:
                if not self._started:  # at start, a conflict is the caller's to fix
                    self._ready_error = exc
                    self._refused.set()
                    raise
                # Another worker took it while this one was cut off: say so, serve the rest.
                logger.error("worker %s: %s; it keeps its other AIDs", self.name, exc)
                lost.add(agent_type)
        for subscription in list(self._subscriptions):
            if getattr(subscription, "agent_type", None) not in lost:
                await self._subscribe_with_host(subscription)
        await self.directory.announce()
        self.directory.online = True
        self._started = True
        if self.held_aids():  # a worker started before its app registers anything says so later
            self.log_registered()
        self._outbox.connected = True
        self._identity_refused = False
        if self._acks.pending:  # what was handled while the link was down
            self._acks.flush()
        self._outbox.restart()
        self._changed()

    def held_aids(self) -> list[str]:
        """The AIDs this worker has registered with the host (its own internal agents left out)."""
        return [t for t in self._types if not t.startswith(WORKER_AGENT_PREFIX)]

    def log_registered(self) -> None:
        """Log one line with the AIDs this worker holds."""
        held = self.held_aids()
        logger.info("worker %s: registered %d AIDs: %s", self.name, len(held), ", ".join(held) or "-")

    def _on_refused(self, error: grpc.aio.AioRpcError) -> None:
        refusal = WorkerIdentityError(f"the host at {self._link.address} refused worker {self.name}: {error.details()}")
        if not self._started:  # at start, it is the caller's to fix
            self._ready_error = refusal
            self._refused.set()
        elif not self._identity_refused:
            self._identity_refused = True
            logger.error("worker %s: %s; it keeps trying", self.name, refusal)

    def _on_lost(self) -> None:
        self._returning.lost()  # best effort: what was on the link will not come back
        self._outbox.connected = False
        self.directory.online = False
        self.directory.mark_all_away()
        logger.warning("worker %s: lost the host at %s", self.name, self._link.address)
        self._changed()

    def _on_held(self, aid: str) -> None:
        kept = self._outbox.kept().get(aid, 0)
        if kept:
            logger.info("worker %s: %s is held again; delivering %d kept messages", self.name, aid, kept)
        self._outbox.restart(aid)
        self._changed()

    async def _register_with_host(self, agent_type: str) -> None:
        deadline = asyncio.get_running_loop().time() + REGISTRATION_WAIT
        while True:
            policy = self._policies.get(agent_type)
            metadata = self._link.metadata
            if policy is not None:
                secret = self._services[agent_type].ledger.secret
                metadata = [*metadata, (SERVICE_METADATA, policy), (SERVICE_SECRET_METADATA, secret)]
            try:
                await self._link.stub.RegisterAgent(
                    agent_worker_pb2.RegisterAgentTypeRequest(type=agent_type), metadata=metadata
                )
                if not agent_type.startswith(WORKER_AGENT_PREFIX):
                    self.directory.mark_held(agent_type, "service" if policy is not None else self.name)
                return
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.PERMISSION_DENIED):
                    raise AgentRegistrationError(exc.details()) from None
                if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
                if asyncio.get_running_loop().time() > deadline:
                    raise AgentRegistrationError(f"{agent_type}: {exc.details()}") from None
                await asyncio.sleep(0.05)  # the host is still letting go of a closing connection

    async def _subscribe_with_host(self, subscription: Subscription) -> None:
        from .._autogen_internals import subscription_to_proto

        await self._link.stub.AddSubscription(
            agent_worker_pb2.AddSubscriptionRequest(subscription=subscription_to_proto(subscription)),
            metadata=self._link.metadata,
        )

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
        self._types.append(agent_type.type)
        if self._link.connected:
            await self._register_with_host(agent_type.type)
        return agent_type

    async def _register_agent_type(self, agent_type: str) -> None:
        self._types.append(agent_type)
        if self._link.connected:
            await self._register_with_host(agent_type)

    async def add_subscription(self, subscription: Subscription) -> None:
        await self._subscription_manager.add_subscription(subscription)
        self._subscriptions.append(subscription)
        if self._link.connected:
            await self._subscribe_with_host(subscription)

    async def remove_subscription(self, id: str) -> None:
        await self._subscription_manager.remove_subscription(id)
        self._subscriptions = [s for s in self._subscriptions if s.id != id]
        if self._link.connected:
            await self._link.stub.RemoveSubscription(
                agent_worker_pb2.RemoveSubscriptionRequest(id=id), metadata=self._link.metadata
            )

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
        if self._tracer is None and self._interventions is None:
            await self._publish(message, topic_id, sender, message_id)
            return
        helper = self._tracer.helper if self._tracer is not None else None
        ctx = MessageContext(sender, topic_id, False, cancellation_token or CancellationToken(), message_id)
        result, created = await begin_publish(message, topic_id, ctx, self._interventions, helper)
        if isinstance(result, MessageDroppedError):
            self._dropped(message, result, topic_id)
            return
        message = result
        if helper is None or created is None:
            await self._publish(message, topic_id, sender, message_id)
            return
        # As autogen-core: publish is a root linked to create; the event names it as the parent of
        # the receiver's process span, and names create for that span to link to.
        with detached(), helper.trace_block("publish", topic_id, parent=created):
            await self._publish(message, topic_id, sender, message_id, created=created.traceparent)

    def _dropped(self, message: Any, error: MessageDroppedError, topic_id: TopicId) -> None:
        """An intervention handler dropped `message`: a dead letter for the AID it was for (any
        other publish names its topic, since who subscribes is known only to the host)."""
        owner = topic_id.type[len(INBOX_PREFIX) :] if topic_id.type.startswith(INBOX_PREFIX) else topic_id.type
        if self._on_undeliverable is not None:
            self._on_undeliverable(AgentId(owner, "default"), message, error)
            return
        envelope = message if isinstance(message, AUNMessage) else None
        self.archive.record_event(owner, RecordKind.DEAD_LETTER, f"{type(error).__name__}: {error}", envelope)

    async def _publish(
        self, message: Any, topic_id: TopicId, sender: AgentId | None, message_id: str, created: str | None = None
    ) -> None:
        event = self._events.build(message, topic_id, sender, message_id, created=created)
        if not topic_id.type.startswith(INBOX_PREFIX):
            comes_back = await self._subscribed_here(topic_id)  # asked first: nothing can come back before
            if self._link.send(agent_worker_pb2.Message(cloudEvent=event)) and comes_back:
                self._returning.sent(message_id, asyncio.get_running_loop().time())
            return
        aid = topic_id.type[len(INBOX_PREFIX) :]
        if self._outbox.full:
            error = OutboxFullError(f"the outbox holds {self._outbox.capacity} unacknowledged messages; {aid} is not taking them")
            owner = message.from_aid if isinstance(message, AUNMessage) else aid
            self.archive.record_event(owner, RecordKind.DEAD_LETTER, f"OutboxFullError: {error}", message if isinstance(message, AUNMessage) else None)
            raise error
        scope = DELIVERY.get()
        if scope is not None and not scope.sealed:
            scope.sends.append((aid, event))  # leaves with the handling's commit, not before
            return
        self._outbox.append(aid, event)
        self.archive.request_commit()

    async def _subscribed_here(self, topic_id: TopicId) -> bool:
        """An agent this worker holds subscribes to `topic_id` (the runtime's own topics aside:
        the host keeps those to their owners)."""
        if topic_id.type.startswith(AUN_PREFIX):
            return False
        recipients = await self._subscription_manager.get_subscribed_recipients(topic_id)
        return any(recipient.type in self._agent_factories for recipient in recipients)

    # -- receiving ---------------------------------------------------------------------------------

    def _on_host_message(self, message: agent_worker_pb2.Message) -> None:
        kind = message.WhichOneof("message")
        if kind == "request":
            self._refuse_rpc(message.request)
            return
        if kind != "cloudEvent":
            return
        event = message.cloudEvent
        topic = event.type
        if topic == DIRECTORY_TYPE:
            self.directory.apply(event_json(event))
            self._changed()
        elif topic.startswith(ACK_PREFIX):
            for aid, through in event_json(event)["acks"].items():
                self._outbox.acknowledged(aid, int(through))
            self._changed()
        elif self._closing:
            return  # stopping: not acknowledged, so its sender sends it again to the next run
        elif topic.startswith(INBOX_PREFIX) and ORIGIN_ATTR in event.attributes:
            attributes = event.attributes
            origin = attributes[ORIGIN_ATTR].ce_string
            aid = topic[len(INBOX_PREFIX) :]
            if aid not in self._agent_factories:
                logger.warning("worker %s: got a delivery for %s, which it does not hold; the sender will retry", self.name, aid)
                return
            service = self._services.get(aid)
            if service is not None:
                service.accept(origin, attributes[SEQ_ATTR].ce_integer, attributes[BASE_ATTR].ce_integer, event)
                return
            ready, reack = self._inbound.accept(
                origin, aid, attributes[SEQ_ATTR].ce_integer, attributes[BASE_ATTR].ce_integer, event
            )
            for seq, item in ready:
                self._deliveries.spawn(Delivery(origin, aid, seq), item)
            if reack:
                self._acks.due({origin: {aid: self._inbound.position(origin, aid)}})
        else:  # a plain autogen-ext publish: best effort
            task = self._deliveries.spawn(None, event)
            task.add_done_callback(lambda _, message_id=event.id: self._came_back(message_id))  # type: ignore[misc]

    def _came_back(self, message_id: str) -> None:
        """A plain publish's copy was handled here: if this worker sent it, idle waits no longer."""
        self._returning.returned(message_id)
        self._changed()

    def _on_commit(self, commit: Commit) -> None:
        if commit.outbox:
            self._outbox.committed(commit.outbox)
        if commit.handled:
            self._acks.due(self._inbound.committed(commit.handled))
        if commit.service:
            by_aid: dict[str, list[tuple[str, int]]] = {}
            for origin, aid, seq in commit.service:
                by_aid.setdefault(aid, []).append((origin, seq))
            for aid, handled in by_aid.items():
                self._services[aid].committed(handled)
        self._changed()

    def _refuse_rpc(self, request: agent_worker_pb2.RpcRequest) -> None:
        logger.warning("worker %s: refused an RPC to %s: AUN has no request/response", self.name, request.target.type)
        self._link.send(
            agent_worker_pb2.Message(
                response=agent_worker_pb2.RpcResponse(request_id=request.request_id, error=str(RPCForbiddenError()))
            )
        )

    # -- unsupported on a worker -------------------------------------------------------------------

    async def save_state(self) -> Mapping[str, Any]:
        raise NotImplementedError("a worker's state is its archive file; there is no save_state")

    async def load_state(self, state: Mapping[str, Any]) -> None:
        raise NotImplementedError("a worker's state is its archive file; there is no load_state")
