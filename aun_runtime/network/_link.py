"""`AIDLink`: one exposed AID on the AUN network: its client, what arrives for it, what it sends.

Inbound, the client hands over a page of messages at a time (its `message.batch` and
`group.message_batch` events) and acknowledges the page to the network only after the handler
returned. The handler turns each message into an [`AUNMessage`][aun_runtime.AUNMessage], publishes it to the local
recipient and returns once the recipient's channel has archived every verdict and the archive has
committed: nothing acknowledged is only in memory. A message that cannot be an [`AUNMessage`][aun_runtime.AUNMessage]
(a payload that is not an object, one the client could not parse...) is recorded as a dead letter
and acknowledged: kept, not retried, and what follows it still arrives.

Outbound, messages wait in the durable outbox and leave in *lanes*: one per (this AID, destination),
in order, each message tried until the network has it. Up to `SENDS_IN_FLIGHT` of a lane wait
for their answers at once; a request is written only while the one before it is on the wire (or
settled), so one whose try failed, on a connection now gone say, goes again before anything behind
it goes at all. The connection being down (or
being re-established) makes a lane wait for the client to be ready, for as long as it takes; other
failures are tried again with growing pauses up to `max_attempts` times, and an answer that can
never change (no such AID, not a member of the group) makes the message a dead letter at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any

from protocols.aun import AUNMessage
from protocols.errors import InvalidMessageError

from ..base._trace_context import continued, traceparent_of
from ..base._waiting import wait_set
from ._card import publish_card
from ._client_io import ON_WIRE, flush_cursors, trim_stores
from ._config import GatewayAgentConfig
from ._envelope import message_from_event, send_call
from ._errors import IdentityError, NetworkRefusedError
from ._identity import open_client
from ._invitations import Invitations
from ._name_answers import share_host_answers
from ._outbox import Outbox, OutboxItem
from ._push_pages import PushPages
from ._verdict import Verdict, describe, judge

__all__ = ["FIRST_CONNECTIONS", "STOP_TIMEOUT", "AIDLink", "LinkState", "LinkStats"]

log = logging.getLogger("aun_runtime.gateway")

#: How often a lane waiting for the connection looks at the client's state, in seconds, besides
#: being woken by the client's own ``state_change`` events (those queue behind message deliveries).
READY_POLL = 0.25
#: The first pause before a failed send is tried again, in seconds; it doubles up to the configured
#: ``retry_max_delay``.
FIRST_RETRY_DELAY = 0.2
#: How many of one gateway agent's AIDs may be registering, logging in and connecting for the first
#: time at once. Each costs the gateway a key pair's certificate, a login and a handshake: 1,000 at
#: once made some wait past the client's 10 s connect timeout on a 2-core machine, and 32 keep both
#: cores busy (connecting is CPU-bound on both sides), so the whole takes no longer.
FIRST_CONNECTIONS = 32

#: Messages of one lane (one sender, one destination) that may wait for the network's answer at once.
SENDS_IN_FLIGHT = 16
#: How far into a request frame its method is: ``{"jsonrpc":"2.0","id":"rpc-<16 hex>","method":...``.
_REQUEST_HEAD = 96

#: How often the link looks whether the client has given up reconnecting, in seconds (besides
#: ``state_change`` events, which queue behind message deliveries).
SUPERVISE_POLL = 1.0
#: How long stopping a link waits for its tasks (its connection's supervisor, its lanes) to end
#: once cancelled, in seconds. They end at their next await, well under a second even on a loaded
#: machine; a task that swallowed its cancellation (in the client's own calls, Python 3.11's
#: ``asyncio.wait_for`` returns the result when it completes in the same turn as the cancel; the
#: link's own waits use `wait_set`, which does not) is noticed by looking at ``_stopping`` within
#: ``SUPERVISE_POLL``. Reached, the link stops anyway (its client is closed, which fails what
#: the task waits for) and `stop` returns False, so the gateway agent raises rather than hangs.
STOP_TIMEOUT = 10.0
#: Client states after which it does not reconnect by itself.
_GAVE_UP = frozenset({"connection_failed", "closed", "standby", "no_identity"})

Deliver = Callable[[list[tuple[AUNMessage, str]]], Awaitable[None]]
DeadLetter = Callable[[str, AUNMessage | None, BaseException], None]

_INBOUND_EVENTS = frozenset({"message.received", "group.message_created"})


class LinkState(Enum):
    """Where one exposed AID stands with the network."""

    STARTING = "starting"  #: getting its identity and first connection
    CONNECTED = "connected"  #: the client is ready
    RECONNECTING = "reconnecting"  #: connected before; the client is re-establishing the connection
    FAILED = "failed"  #: the network refused the identity; see ``AIDLink.error``
    STOPPED = "stopped"


@dataclass
class LinkStats:
    """What went through one link."""

    received: int = 0  #: messages handed to the local recipient (duplicates included)
    pages: int = 0  #: pages of them the client handed over (one message each, or many: `._push_pages`)
    refused: int = 0  #: arrivals that were not valid messages (dead letters)
    sent: int = 0  #: messages the network took
    retries: int = 0  #: sends tried again
    dead_letters: int = 0  #: messages the network refused for good


@dataclass(eq=False)
class _Flight:
    """One message of a lane on its way: its task, and whether its latest try's request is written
    (set when the request goes on the wire, cleared when that try fails)."""

    item: OutboxItem
    on_wire: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def written(self, request: str, frame: str) -> None:
        # The message's own request, not a key lookup the client makes on the way to it.
        if request in frame[:_REQUEST_HEAD]:
            self.on_wire.set()

    @property
    def passed(self) -> bool:
        """Whether what comes after this message may be written: it is on the wire or settled."""
        return self.on_wire.is_set() or self.task is None or self.task.done()

    async def passable(self) -> None:
        """Return once `passed` holds."""
        if self.passed:
            return
        assert self.task is not None
        waiter = asyncio.ensure_future(self.on_wire.wait())
        try:
            await asyncio.wait((self.task, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()


@dataclass
class _Lane:
    # Bounded by the outbox: every item here is a row of it, and the outbox refuses past its capacity.
    items: deque[OutboxItem] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None


class AIDLink:
    """The network side of one exposed local AID.

    Args:
        aid: the local AID.
        config: the gateway agent's configuration.
        seed: the key-store seed.
        outbox: where its outgoing messages wait.
        deliver: hands arrivals to the runtime (`AUNRuntime.deliver_remote`).
        dead_letter: records a dead letter (owner, message, error).
        card: the agent.md it publishes once connected (`._card`); None publishes nothing.
    """

    def __init__(
        self, aid: str, config: GatewayAgentConfig, seed: str, outbox: Outbox, deliver: Deliver, dead_letter: DeadLetter,
        card: str | None = None, first_connections: asyncio.Semaphore | None = None,
    ) -> None:
        self.aid = aid
        # Shared by the gateway agent's links: how many may be registering, logging in and making
        # their first connection at once (see FIRST_CONNECTIONS).
        self._first_connections = first_connections or asyncio.Semaphore(FIRST_CONNECTIONS)
        self.card = card
        self.config = config
        self.state = LinkState.STARTING
        self.error: BaseException | None = None
        self.stats = LinkStats()
        self.client: Any = None
        self._seed = seed
        self._outbox = outbox
        self._deliver = deliver
        self._dead_letter = dead_letter
        self._lanes: dict[str, _Lane] = {}
        self._state_changed = asyncio.Event()
        self._connected = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._pages: set[asyncio.Task[Any]] = set()  # the client's tasks running a page handler now
        self.invitations: Invitations | None = None  # once the client is made
        self.push_pages = PushPages()  # direct messages that come faster than handled: in pages
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Get the identity and connect, in the background (retrying while the network is away)."""
        self._runner = _spawn(self._run(), f"aun:link:{self.aid}")

    async def wait_connected(self) -> None:
        """Return once the client has been ready at least once."""
        await self._connected.wait()

    @property
    def ready(self) -> bool:
        return self.client is not None and bool(self.client.is_ready)

    async def stop(self) -> bool:
        """Stop sending and receiving; what waits in the outbox stays there for the next start.

        Returns False if one of its tasks had not ended `STOP_TIMEOUT` seconds after being cancelled
        (the link is stopped all the same)."""
        self._stopping = True
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        if self._runner is not None:
            tasks.append(self._runner)
        for task in tasks:
            task.cancel()
        for page in self._pages:  # a page waiting for a stopped runtime is never acknowledged
            page.cancel()
        stuck: set[asyncio.Task[None]] = set()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=STOP_TIMEOUT)
        if stuck:
            log.error("%s: %d task(s) still running %.0f s after stopping: %s", self.aid, len(stuck), STOP_TIMEOUT,
                      ", ".join(task.get_name() for task in stuck))
        if self.invitations is not None:
            await self.invitations.close()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
            flush_cursors(self.client)  # what the client saved while closing, too
        self.state = LinkState.STOPPED
        return not stuck

    async def _run(self) -> None:
        async with self._first_connections:
            if not await self._first_connection():
                return
        if self.card is not None:  # before "connected": who waits for that may look the card up
            await publish_card(self.client, self.aid, self.card)
        trim_stores(self.client)  # what connecting read stays on disk, not in this process's memory
        self._connected.set()
        log.info("%s is on the AUN network", self.aid)
        await self._supervise()

    async def _first_connection(self) -> bool:
        """The identity and the first connection; False if the network refused the identity."""
        delay = FIRST_RETRY_DELAY
        while self.client is None:
            try:
                self.client = await open_client(self.aid, self.config, self._seed, self.push_pages.sift)
            except IdentityError as exc:
                self.error = exc
                if not exc.retryable:
                    self.state = LinkState.FAILED
                    log.error("%s", exc)
                    return False
                log.warning("%s; trying again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.config.reconnect_max_delay)
        client = self.client
        client.on("message.batch", self._on_direct_page)
        client.on("group.message_batch", self._on_group_page)
        client.on("state_change", self._on_state_change)
        self.invitations = Invitations(self.aid, client, self.config.accept_invitations)
        client.on("group.invite_received", self.invitations.heard)
        await self._connect()
        return True

    async def _connect(self) -> None:
        """`connect` until it succeeds. The client reconnects by itself once connected, but not
        before its first connection, nor after the gateway closed it with a code that says stop."""
        options = {
            "auto_reconnect": True,
            "retry_initial_delay": min(0.5, self.config.reconnect_max_delay),
            "retry_max_delay": self.config.reconnect_max_delay,
            "delivery_mode": self.config.delivery_mode,  # fanout, or a queue member (see queue_routing)
        }
        delay = FIRST_RETRY_DELAY
        start_over = False
        while True:
            try:
                if start_over:
                    # Backing off, the client neither logs in nor lets anyone else: from standby,
                    # where disconnecting leaves it, its next connect logs in first.
                    await self.client.disconnect()
                await self.client.connect(options)
                break
            except Exception as exc:
                self.error = exc
                start_over = _without_token(exc)
                log.warning("%s cannot connect to the AUN network (%s); trying again in %.1f s", self.aid, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.config.reconnect_max_delay)
        self.error = None
        self.state = LinkState.CONNECTED
        self._state_changed.set()

    async def _supervise(self) -> None:
        """Connect again whenever the client has given up (its own reconnecting is left to it).
        Ends once stopping, even if the cancel that came with it was swallowed (see `STOP_TIMEOUT`)."""
        while not self._stopping:
            self._state_changed.clear()
            await wait_set(self._state_changed, SUPERVISE_POLL)
            if str(getattr(self.client.state, "value", self.client.state)) in _GAVE_UP:
                log.warning("%s: the AUN client stopped reconnecting (%s); connecting again", self.aid, self.client.state)
                self.state = LinkState.RECONNECTING
                await self._connect()

    async def _on_state_change(self, event: dict[str, Any]) -> None:
        # A coroutine, so the client runs it on the loop (a plain function it runs on a thread,
        # and an asyncio.Event is not to be set from one).
        if self.client is not None and self._connected.is_set() and not self._stopping:
            self.state = LinkState.CONNECTED if self.client.is_ready else LinkState.RECONNECTING
        self._state_changed.set()

    async def _until_ready(self) -> None:
        while not self.ready:
            self._state_changed.clear()
            await wait_set(self._state_changed, READY_POLL)

    # -- inbound -----------------------------------------------------------------------------------

    async def _on_direct_page(self, page: dict[str, Any]) -> None:
        await self._take_page(page, group=False)

    async def _on_group_page(self, page: dict[str, Any]) -> None:
        await self._take_page(page, group=True)

    async def _take_page(self, page: dict[str, Any], *, group: bool) -> None:
        # The client acknowledges the page to the network when this returns, and not if it raises.
        arrivals: list[tuple[AUNMessage, str]] = []
        traces: list[str | None] = []  # the sender's trace context of each arrival (None: none)
        refused = self.stats.refused
        for item in page.get("items") or ():
            if not isinstance(item, dict):
                continue
            event, body = item.get("event"), item.get("payload")
            if event not in _INBOUND_EVENTS or not isinstance(body, dict) or body.get("kind"):
                continue  # recalls and the network's unread hints carry no message
            try:
                arrivals.append((message_from_event(body, self.aid, group=group), self.aid))
                traces.append(traceparent_of(body))
            except Exception as exc:  # whatever is wrong with one arrival, the next ones still come
                self.stats.refused += 1
                origin = f"message {body.get('message_id')!r} from {body.get('from') or body.get('sender_aid')!r}"
                detail = str(exc) if isinstance(exc, InvalidMessageError) else f"{type(exc).__name__}: {exc}"
                self._dead_letter(self.aid, None, InvalidMessageError(f"{origin} arrived from the network, unusable: {detail}"))
        if not arrivals and refused == self.stats.refused:
            return  # recalls and hints only: nothing was recorded, nothing to wait for
        self.stats.received += len(arrivals)
        self.stats.pages += 1
        task = asyncio.current_task()
        if task is not None:
            self._pages.add(task)
        try:
            if not any(traces):
                await self._deliver(arrivals)  # also commits the dead letters recorded above
            else:  # each in the trace its sender sent it in
                for arrival, traceparent in zip(arrivals, traces, strict=True):
                    with continued(traceparent):
                        await self._deliver([arrival])
        finally:
            self._pages.discard(task)
        if not group:
            for message, _ in arrivals:
                if message.seq is not None:
                    self.push_pages.handed_over(message.from_aid, message.seq)

    # -- outbound ----------------------------------------------------------------------------------

    def enqueue(self, item: OutboxItem) -> None:
        """Send `item` after everything this AID sent to the same destination before it."""
        lane = self._lanes.get(item.lane)
        if lane is None:
            lane = self._lanes[item.lane] = _Lane()
        lane.items.append(item)
        if lane.task is None and not self._stopping:
            lane.task = _spawn(self._drain(lane), f"aun:lane:{self.aid}:{item.lane}")

    def waiting(self) -> int:
        """Messages of this AID not yet taken by the network."""
        return sum(len(lane.items) for lane in self._lanes.values())

    async def _drain(self, lane: _Lane) -> None:
        # Up to SENDS_IN_FLIGHT messages of the lane wait for their answers at once; each is
        # written only while the one before it is on the wire (or settled), and the gateway takes
        # the requests of one connection in the order they were written: the lane's order. They
        # leave the outbox in that order too, each once the network has it.
        flying: deque[_Flight] = deque()
        try:
            while lane.items:
                while len(flying) < min(SENDS_IN_FLIGHT, len(lane.items)):
                    flight = _Flight(lane.items[len(flying)])
                    flight.task = _spawn(self._send(flight, flying[-1] if flying else None), f"aun:send:{self.aid}")
                    flying.append(flight)
                    await flight.passable()
                assert flying[0].task is not None
                await flying[0].task
                flying.popleft()
                self._outbox.remove(lane.items.popleft())
        finally:
            tasks = [flight.task for flight in flying if flight.task is not None]
            for task in tasks:  # stopping: what they carried stays in the outbox
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            lane.task = None

    async def _send(self, flight: _Flight, before: _Flight | None) -> None:
        """Send `flight`'s message until the network has it or refuses it for good, each try
        only while `before` (the lane's message ahead of it) is on the wire or settled: after a
        lost connection the one ahead is sent again first, and this one must not overtake it."""
        item = flight.item
        method, params = send_call(item.message, item.recipient, encrypt=self.config.encrypt, traceparent=item.trace)
        ON_WIRE.set(partial(flight.written, f'"method":"{method}"'))
        failures, delay = 0, FIRST_RETRY_DELAY
        while True:
            await self._connected.wait()
            await self._until_ready()
            if before is not None and not before.passed:
                await before.passable()
                continue  # the connection may have gone meanwhile
            try:
                await self.client.call(method, params)
            except Exception as exc:
                flight.on_wire.clear()
                verdict = judge(exc)
                if verdict is not Verdict.CONNECTION:
                    failures += 1
                if verdict is Verdict.REFUSED or failures >= self.config.max_attempts:
                    self.stats.dead_letters += 1
                    reason = f"the AUN network refused {method} to {item.lane}: {describe(exc)}"
                    if verdict is not Verdict.REFUSED:
                        reason += f" (tried {failures} times)"
                    self._dead_letter(item.sender, item.message, NetworkRefusedError(reason))
                    return
                self.stats.retries += 1
                log.info("%s: %s to %s failed (%s); trying again", self.aid, method, item.lane, describe(exc))
                await asyncio.sleep(delay if verdict is Verdict.RETRY else min(delay, READY_POLL))
                delay = min(delay * 2, self.config.retry_max_delay)
            else:
                self.stats.sent += 1
                return

    # -- liveness ----------------------------------------------------------------------------------

    async def ping_network(self, timeout: float) -> bool:
        """`meta.ping` on this AID's own connection: True if the gateway answered in time."""
        if not self.ready:
            return False
        try:
            answer = await asyncio.wait_for(self.client.call("meta.ping", {}), timeout)
        except Exception:
            return False
        return isinstance(answer, dict) and answer.get("pong") is True

    async def knows(self, aid: str, timeout: float) -> bool:
        """Whether the network resolves `aid`'s certificate (the AID exists there)."""
        try:
            await asyncio.wait_for(self.client.lookup_peer(aid), timeout)
        except Exception:
            return False
        return True


def _without_token(exc: Exception) -> bool:
    """Whether `connect` failed because the client holds no access token. A first connection whose
    log-in failed (a gateway gone or too slow to answer, say) leaves the client backing off without
    one; `connect` then refuses at once, every time, and so does `authenticate` (it logs in
    only from standby): the link disconnects the client, which puts it back in standby, before its
    next try."""
    from aun_core import StateError  # not at the top: importing the runtime must not load the client

    return isinstance(exc, StateError) and "access_token" in str(exc)


def _spawn(coroutine: Awaitable[None], name: str) -> asyncio.Task[None]:
    # A fresh context: a task started from inside a handler must not inherit the handler's (the
    # client marks its own handler context, and sending from inside it behaves differently). In
    # it, and in the client's tasks started from it, host names are looked up once for all links.
    context = contextvars.Context()
    context.run(share_host_answers)
    return asyncio.get_running_loop().create_task(coroutine, name=name, context=context)  # type: ignore[arg-type]
