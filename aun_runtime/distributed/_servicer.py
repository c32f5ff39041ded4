"""The host's servicer: autogen-ext's, with AUN rules, a directory, lifecycle lines and counters.

On top of autogen-ext's routing it:

* **authenticates workers**: a stream that names a worker must present that worker's secret (see
  `._identity`); the first secret seen for a name is remembered, and a later stream claiming
  the name with another one is refused with `UNAUTHENTICATED`. Every other call of a worker is
  bound to its open stream (`client-id`) and carries the same proof;
* **refuses RPC**: an `RpcRequest` is answered at once with an error (a remote worker may still
  try; AUN has no request/response), instead of being forwarded (or hanging forever);
* **keeps the directory**: which worker holds which AID (held, or *away* when its worker vanished
  without leaving) and every group, sent to each worker as a snapshot and then as changes. An AID
  belongs to the worker that registered it until that worker leaves: the same worker, restarted
  (same name, same secret), takes it back at once; no other worker can take it, held or away;
* **keeps the runtime's own names to the runtime**: a stream may send deliveries only as its own
  worker (`aunorigin`), acknowledge only deliveries to AIDs registered on it, register only its
  own `aun.worker.<name>` type, and subscribe `aun.*` topics only for the AIDs it holds;
  subscriptions are kept per connection, so one client cannot remove or shadow another's;
* **routes service AIDs**: an AID that several workers register as *instances* (with the
  `aun-service` metadata naming its routing policy) gets each delivery on one live instance as
  the policy says (see `._service_routing`); a plain AID keeps its one holder, and a
  registration that mixes the two, or two policies, is refused with `ALREADY_EXISTS`;
* **answers a malformed call or message with** `INVALID_ARGUMENT` (and one log line);
* **reads and writes batch frames** (see `._frames`): each event of a frame is checked as if it
  had come alone, and the host packs what it sends only for workers that read frames;
* **remembers, given a state file** (see `._host_state`): worker names and their secrets'
  digests, AID ownership, service AIDs and groups are written down before the call that changed
  them is answered, and a restarted host starts from them, everything away until its owner is back;
* **ends the stream of a worker whose event loop went silent** (see `._heartbeat`): a worker that
  sends heartbeats and has sent nothing for `HEARTBEAT_TIMEOUT` is dropped, as if its connection
  had, though gRPC still answers the keepalive pings for it;
* **logs one line per lifecycle event** (connected, registered, disconnected, left, refused, dead
  letter) and counts them ([`HostStats`][aun_runtime.distributed.HostStats]).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import grpc
from autogen_core import Subscription, TopicId, TypePrefixSubscription, TypeSubscription
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHostServicer
from autogen_ext.runtimes.grpc._utils import subscription_from_proto, subscription_to_proto
from autogen_ext.runtimes.grpc._worker_runtime_host_servicer import CallbackChannelConnection
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

from protocols.aun import DispatchMode, validate_aid, validate_group_id
from protocols.errors import AUNError

from .._errors import RPCForbiddenError
from .._topics import GROUP_PREFIX, INBOX_PREFIX
from ._errors import HostStateError
from ._frames import BATCH_TYPE, FrameError, drain, pack, unpack
from ._heartbeat import HEARTBEAT_TYPE, watch
from ._host_state import HostState, Snapshot
from ._identity import Identities, IdentityRefused
from ._service_routing import SERVICE_METADATA, SERVICE_SECRET_METADATA, ServiceRoute, secret_digest
from ._service_store import POLICIES
from ._wire import (
    ACK_PREFIX,
    AUN_PREFIX,
    DIRECTORY_SERVICE,
    DIRECTORY_TYPE,
    HELLO_TYPE,
    ORIGIN_ATTR,
    SECRET_METADATA,
    WORKER_AGENT_PREFIX,
    WORKER_METADATA,
    control_event,
    decode_json,
    encode_json,
    event_json,
)

__all__ = ["AUNHostServicer", "HostStats", "rpc_handlers"]

logger = logging.getLogger("aun_runtime.distributed")

HELD, AWAY = "held", "away"
_Status = grpc.StatusCode
#: autogen-core's rule for agent types, with a length limit.
_AGENT_TYPE = re.compile(r"^[\w\-\.]+\Z")
_MAX_AGENT_TYPE_LENGTH = 255
_GROUP_OPS = frozenset({"create", "announce", "add", "remove", "mode"})
_MODES = frozenset(str(mode) for mode in DispatchMode)


@dataclass
class HostStats:
    """What the host saw, counted. `refused`: calls and streams refused (an identity that does
    not match, a reserved name, a malformed request); `acks_refused`: acknowledgements dropped
    because their stream does not hold the AID they acknowledge."""

    workers_connected: int = 0
    connects: int = 0
    disconnects: int = 0
    registrations: int = 0
    events_routed: int = 0
    not_delivered: int = 0
    rpc_refused: int = 0
    refused: int = 0
    acks_refused: int = 0


class Refusal(Exception):
    """A call, or a message on a stream, that the host refuses: the call (or stream) ends with
    `code` and `message`, and the host logs one line at `level`."""

    def __init__(self, code: grpc.StatusCode, message: str, *, level: int = logging.WARNING) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.level = level


@dataclass
class _Group:
    holder: str
    mode: str
    members: set[str] = field(default_factory=set)

    def view(self) -> dict[str, Any]:
        return {"members": sorted(self.members), "mode": self.mode, "holder": self.holder}


@dataclass(eq=False)
class _Client:
    """One data stream: whose it is (`worker` None: a plain autogen-ext client, no identity)."""

    client_id: str
    worker: str | None
    peer: str
    greeted: bool = False  # sent its hello (and got the directory snapshot)
    frames: bool = False  # said in its hello that it reads batch frames (see ._frames)
    heartbeat: bool = False  # said in its hello that it sends heartbeats (see ._heartbeat)
    heard: float = field(default_factory=time.monotonic)  # when its stream last carried anything
    types: set[str] = field(default_factory=set)  # registered on this stream: it may acknowledge these
    warned: set[str] = field(default_factory=set)

    @property
    def who(self) -> str:
        return f"worker {self.worker}" if self.worker is not None else f"client {self.client_id[:8]} at {self.peer}"


#: Put on a stream's send queue to wake its handler, which then ends the stream with the refusal.
_END = agent_worker_pb2.Message()
#: What the JSON service's request parser gives for bytes that are not JSON.
_MALFORMED = object()


class _DataConnection(CallbackChannelConnection[agent_worker_pb2.Message, agent_worker_pb2.Message]):
    """autogen-ext's data connection without its per-message log line (which formats the whole
    message as text even when nobody logs at INFO: most of the host's time per message), and with
    a way to end the stream: a `Refusal` raised by the handler ends it with that status."""

    refusal: Refusal | None = None
    silence: str | None = None  # why the host ends the stream of a worker gone silent

    async def _receive_messages(self, client_id: str, request_iterator: AsyncIterator[agent_worker_pb2.Message]) -> None:
        try:
            async for message in request_iterator:
                await self._handle_message(message)
        except Refusal as refusal:
            self.refusal = refusal
            await self._send_queue.put(_END)

    def queued(self) -> agent_worker_pb2.Message | None:
        """The next message waiting to be sent, if one is waiting already (never waits)."""
        return None if self._send_queue.empty() else self._send_queue.get_nowait()

    async def stop_receiving(self) -> None:
        """Stop reading the client's side of the stream (this side is ending it)."""
        self._receiving_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.RpcError):
            await self._receiving_task


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("host: routing an event failed", exc_info=task.exception())


def _metadata(context: Any) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ())}


def _who(context: Any) -> str:
    name = _metadata(context).get(WORKER_METADATA)
    peer = context.peer()
    return f"{peer} (worker {name[:100]!r})" if name is not None else peer


def _scoped(client_id: str, subscription_id: str) -> str:
    """Subscriptions are kept per connection: one client's ids never meet another's."""
    return f"{client_id}/{subscription_id}"


R = TypeVar("R")


class AUNHostServicer(GrpcWorkerAgentRuntimeHostServicer):
    """autogen-ext's host servicer with the AUN additions described in the module docstring."""

    def __init__(self, state: HostState | None = None) -> None:
        super().__init__()
        self.stats = HostStats()
        self._state = state
        self._clients: dict[str, _Client] = {}  # client id -> its data stream
        self._aids: dict[str, tuple[str, str, str]] = {}  # aid -> (worker, client id, held|away)
        self._groups: dict[str, _Group] = {}
        self._services: dict[str, ServiceRoute] = {}  # service aid -> its instances and routing
        self._control_warned: set[str] = set()
        self._streams_ended: asyncio.Event | None = None  # set by `end_streams`: the last stream has ended
        self.identities = Identities()
        if state is not None:
            try:
                self._restore(state.loaded)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise HostStateError(
                    f"{state.path} holds an entry this host cannot read ({exc!r})", value=state.given
                ) from None

    def _restore(self, known: Snapshot) -> None:
        """Start from a state file: everything in it is away (on no stream) until its owner is back."""
        self.identities = Identities(known["workers"])
        self._aids = {aid: (str(worker), "", AWAY) for aid, worker in known["aids"].items()}
        self._groups = {gid: _Group(g["holder"], g["mode"], set(g["members"])) for gid, g in known["groups"].items()}
        self._services = {
            aid: ServiceRoute(s["policy"], bytes.fromhex(s["secret"]), dict.fromkeys(s["instances"]))
            for aid, s in known["services"].items()
        }

    # -- remembering -------------------------------------------------------------------------------

    def _memory(self) -> Snapshot:
        """What the state file keeps: who owns what, nothing of what is live."""
        return {
            "workers": self.identities.digests(),
            "aids": {aid: worker for aid, (worker, _, _) in sorted(self._aids.items())},
            "services": {
                aid: {"policy": s.policy, "secret": s.secret.hex(), "instances": sorted(s.instances)}
                for aid, s in sorted(self._services.items())
            },
            "groups": {
                gid: {"holder": g.holder, "mode": g.mode, "members": sorted(g.members)} for gid, g in sorted(self._groups.items())
            },
        }

    async def _remember(self) -> None:
        """Write what changed to the state file (if there is one) before the change is answered."""
        if self._state is None:
            return
        try:
            await self._state.save(self._memory)
        except HostStateError as exc:
            logger.error("host: %s", exc)
            raise Refusal(_Status.UNAVAILABLE, "the host cannot write its state file now; try again") from None

    async def end_streams(self, timeout: float) -> None:
        """End every data stream from this side, each call with status OK, and wait up to `timeout`
        seconds for them to close. (A stream still open when the server stops is cancelled, which
        gRPC logs as an error, with a traceback, for each.)"""
        self._streams_ended = asyncio.Event()
        if not self._data_connections:
            return
        for connection in list(self._data_connections.values()):
            await connection.send(_END)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._streams_ended.wait(), timeout)

    def close_state(self) -> None:
        if self._state is not None:
            self._state.close()

    # -- refusing ----------------------------------------------------------------------------------

    async def _abort(self, context: Any, what: str, refusal: Refusal) -> NoReturn:
        self.stats.refused += 1
        logger.log(refusal.level, "host: refused %s from %s: %s %s", what, _who(context), refusal.code.name, refusal.message)
        await context.abort(refusal.code, refusal.message)
        raise RuntimeError("context.abort returned")  # it raises, ending the call

    async def _unary(
        self, what: str, request: Any, context: Any, handle: Callable[[Any, Any], Awaitable[R]]
    ) -> R:
        """Run one unary call: a malformed request or a `Refusal` ends it with its status."""
        try:
            if request is None or request is _MALFORMED:
                raise Refusal(_Status.INVALID_ARGUMENT, f"the {what} request could not be parsed")
            return await handle(request, context)
        except Refusal as refusal:
            await self._abort(context, what, refusal)

    def _warn_once(self, client: _Client, key: str, message: str, *args: Any) -> None:
        if key not in client.warned:
            client.warned.add(key)
            logger.warning(message, *args)

    # -- who is calling ----------------------------------------------------------------------------

    def _open(self, context: Any) -> _Client:
        """A new data stream: a worker's (its name proved by its secret) or a plain client's."""
        metadata = _metadata(context)
        client_id = metadata.get("client-id")
        if not client_id:
            raise Refusal(_Status.INVALID_ARGUMENT, "client-id metadata not found.")
        if client_id in self._clients:
            raise Refusal(_Status.INVALID_ARGUMENT, "this client id already has a data stream")
        name = metadata.get(WORKER_METADATA)
        if name is not None:
            try:
                new = self.identities.check(name, metadata.get(SECRET_METADATA), bind=True)
            except IdentityRefused as exc:
                raise Refusal(_Status.UNAUTHENTICATED, str(exc)) from None
            if new:
                logger.info("host: worker %s is new here; its name is bound to its secret from now on", name)
        client = self._clients[client_id] = _Client(client_id, name, context.peer())
        return client

    def _caller(self, context: Any) -> tuple[str, _Client | None]:
        """The client id of a unary call and, for a worker, its stream (the call must prove the
        same identity as the stream did)."""
        metadata = _metadata(context)
        client_id = metadata.get("client-id")
        if not client_id:
            raise Refusal(_Status.INVALID_ARGUMENT, "client-id metadata not found.")
        client = self._clients.get(client_id)
        name = metadata.get(WORKER_METADATA)
        if name is None:
            if client is not None and client.worker is not None:
                raise Refusal(_Status.PERMISSION_DENIED, "this client id is a worker's stream; calls on it need its name and secret")
            return client_id, None
        try:
            self.identities.check(name, metadata.get(SECRET_METADATA), bind=False)
        except IdentityRefused as exc:
            raise Refusal(_Status.UNAUTHENTICATED, str(exc)) from None
        if client is None or client.worker != name:
            raise Refusal(_Status.PERMISSION_DENIED, f"worker {name} has no open data stream with this client id")
        return client_id, client

    def _worker_caller(self, context: Any) -> _Client:
        _, client = self._caller(context)
        if client is None or client.worker is None:
            raise Refusal(_Status.PERMISSION_DENIED, "only a worker, on its open stream, may change the directory")
        return client

    # -- data stream -------------------------------------------------------------------------------

    async def OpenChannel(
        self, request_iterator: AsyncIterator[agent_worker_pb2.Message | None], context: Any
    ) -> AsyncIterator[agent_worker_pb2.Message]:
        """The data stream of one connection: what autogen-ext's host does, minus eager logging,
        plus the identity check and the AUN rules on what arrives."""
        try:
            client = self._open(context)
            await self._remember()  # a name bound for the first time is bound for good
        except Refusal as refusal:
            await self._abort(context, "a data stream", refusal)
            return
        client_id = client.client_id

        async def handle(message: agent_worker_pb2.Message | None) -> None:
            await self._receive_message(client, message)

        async def silent(seconds: float) -> None:
            connection.silence = f"nothing from worker {client.worker} for {seconds:.1f} s (no heartbeat from its event loop)"
            logger.warning("host: %s: dropping its connection", connection.silence)
            await connection.send(_END)

        watching = asyncio.get_running_loop().create_task(
            watch(lambda: client.heard if client.heartbeat else time.monotonic(), silent)
        )
        try:
            connection = _DataConnection(request_iterator, client_id, handle_callback=handle)  # type: ignore[arg-type]
            self._data_connections[client_id] = connection
            async for first in connection:
                # A worker that reads frames gets what waits for it by now in one write (see ._frames).
                for message in pack(drain(first, connection.queued)) if client.frames else (first,):
                    if message is _END:
                        if connection.refusal is not None:
                            await self._abort(context, f"a message on its data stream (client {client_id[:8]})", connection.refusal)
                        await connection.stop_receiving()  # the host is stopping: the call ends, status OK
                        if connection.silence is not None:
                            await context.abort(_Status.UNAVAILABLE, connection.silence)
                        return
                    yield message
        finally:
            watching.cancel()
            self._data_connections.pop(client_id, None)
            if not self._data_connections and self._streams_ended is not None:
                self._streams_ended.set()
            for future in self._pending_responses.pop(client_id, {}).values():
                future.cancel()
            await self._on_client_disconnect(client_id)

    async def _receive_message(self, client: _Client, message: agent_worker_pb2.Message | None) -> None:  # type: ignore[override]
        client.heard = time.monotonic()  # anything on the stream was written by the worker's event loop
        if message is None:
            raise Refusal(_Status.INVALID_ARGUMENT, "the data stream carried bytes that are not an agents.Message")
        kind = message.WhichOneof("message")
        if kind == "cloudEvent":
            event = message.cloudEvent
            topic = event.type
            if topic == BATCH_TYPE:
                self._route(self._frame_events(client, event))
            elif topic == HELLO_TYPE:
                await self._hello(client, event)
            else:
                checked = self._checked_event(client, event)
                if checked is not None:
                    self._route((checked,))
        elif kind == "request":
            await self._refuse(client, message.request)
        elif kind == "response":
            self._warn_once(client, "response", "host: dropped an RPC response from %s: the host forwards no RPC, so it awaits none", client.who)
        else:
            raise Refusal(_Status.INVALID_ARGUMENT, "an empty message on the data stream")

    def _frame_events(self, client: _Client, frame: cloudevent_pb2.CloudEvent) -> list[cloudevent_pb2.CloudEvent]:
        """What passes of a batch frame's events, each checked as if it had come alone. One that is
        refused refuses the whole frame: nothing of it is routed, and the stream ends."""
        try:
            events = unpack(frame)
        except FrameError as exc:
            raise Refusal(_Status.INVALID_ARGUMENT, str(exc)) from None
        checked = [self._checked_event(client, event) for event in events]
        return [event for event in checked if event is not None]

    def _checked_event(self, client: _Client, event: cloudevent_pb2.CloudEvent) -> cloudevent_pb2.CloudEvent | None:
        """An event on the stream of `client`: what may pass, as what; None to drop it."""
        topic = event.type
        if topic.startswith(INBOX_PREFIX):  # a delivery (the hot path: one lookup, one comparison)
            origin = event.attributes.get(ORIGIN_ATTR)
            if origin is not None and origin.ce_string != client.worker:
                raise Refusal(
                    _Status.PERMISSION_DENIED,
                    f"a delivery that claims to come from worker {origin.ce_string[:100]!r} arrived on the stream of {client.who}",
                )
            return event
        if topic.startswith(AUN_PREFIX):
            return self._aun_event(client, event)
        return event

    def _route(self, events: Sequence[cloudevent_pb2.CloudEvent]) -> None:
        """Route `events` in order, in one task (one per message or frame, not per event)."""
        if not events:
            return
        task = asyncio.get_running_loop().create_task(self._process_events(events))
        self._background_tasks.add(task)
        task.add_done_callback(self._background_tasks.discard)
        task.add_done_callback(_log_failure)

    async def _process_events(self, events: Sequence[cloudevent_pb2.CloudEvent]) -> None:
        if len(events) == 1:
            await self._process_event(events[0])  # a failure is logged by the task's callback
            return
        for event in events:
            try:
                await self._process_event(event)
            except Exception:  # as with one task per event: one failure does not stop the others
                logger.exception("host: routing an event of a batch frame failed")

    def _aun_event(self, client: _Client, event: cloudevent_pb2.CloudEvent) -> cloudevent_pb2.CloudEvent | None:
        """An event on another of the runtime's topics: what may pass, as what; None to drop it."""
        topic = event.type
        if topic.startswith(GROUP_PREFIX):
            return event
        if topic == HEARTBEAT_TYPE:  # noted as anything on the stream is (`client.heard`), not routed
            return None
        if topic.startswith(ACK_PREFIX):
            return self._checked_ack(client, event)
        raise Refusal(_Status.PERMISSION_DENIED, f"{topic[:100]!r} is the runtime's own topic; no stream may publish on it")

    def _checked_ack(self, client: _Client, event: cloudevent_pb2.CloudEvent) -> cloudevent_pb2.CloudEvent | None:
        """An acknowledgement passes only for AIDs registered on the stream it came on: only that
        stream received the deliveries it acknowledges. The rest is dropped (its sender keeps the
        messages and sends them again, so nothing is lost by a dropped acknowledgement)."""
        try:
            body = event_json(event)
        except ValueError:
            raise Refusal(_Status.INVALID_ARGUMENT, "an acknowledgement whose body is not JSON") from None
        acks = body.get("acks") if isinstance(body, dict) else None
        if not isinstance(acks, dict) or not all(type(through) is int for through in acks.values()):
            raise Refusal(_Status.INVALID_ARGUMENT, 'an acknowledgement is {"acks": {"<aid>": <handled through>}}')
        foreign = sorted(aid for aid in acks if aid not in client.types)
        if not foreign:
            return event
        self.stats.acks_refused += 1
        self._warn_once(
            client,
            "ack",
            "host: refused an acknowledgement from %s for %s: not registered on its stream, so it did not receive what it acknowledges"
            " (further refusals on this stream are only counted)",
            client.who,
            ", ".join(repr(aid[:100]) for aid in foreign[:5]),
        )
        kept = {aid: through for aid, through in acks.items() if aid in client.types}
        if not kept:
            return None
        forwarded = cloudevent_pb2.CloudEvent()
        forwarded.CopyFrom(event)
        forwarded.binary_data = encode_json({**body, "acks": kept})
        return forwarded

    async def _refuse(self, client: _Client, request: agent_worker_pb2.RpcRequest) -> None:
        self.stats.rpc_refused += 1
        logger.warning("host: refused an RPC from %s to %r: AUN has no request/response", client.who, request.target.type[:100])
        connection = self._data_connections.get(client.client_id)
        if connection is not None:
            response = agent_worker_pb2.RpcResponse(request_id=request.request_id, error=str(RPCForbiddenError()))
            await connection.send(agent_worker_pb2.Message(response=response))

    async def _hello(self, client: _Client, event: cloudevent_pb2.CloudEvent) -> None:
        if client.worker is None:
            raise Refusal(_Status.PERMISSION_DENIED, "aun.hello on a stream that presented no worker name and secret")
        try:
            body = event_json(event)
        except ValueError:
            raise Refusal(_Status.INVALID_ARGUMENT, "aun.hello whose body is not JSON") from None
        if not isinstance(body, dict) or body.get("worker") != client.worker:
            raise Refusal(_Status.INVALID_ARGUMENT, f'aun.hello is {{"worker": "{client.worker}"}} on the stream of worker {client.worker}')
        client.frames = body.get("frames") is True
        client.heartbeat = body.get("heartbeat") is True
        if not client.greeted:
            client.greeted = True
            self.stats.connects += 1
            self.stats.workers_connected = self._workers_connected()
            logger.info("host: worker %s connected (client %s)", client.worker, client.client_id[:8])
        snapshot = {
            "snapshot": True,
            "frames": True,  # this host reads batch frames: the worker may send them (see ._frames)
            "heartbeat": True,  # this host reads heartbeats: the worker sends them (see ._heartbeat)
            "aids": {aid: [w, status] for aid, (w, _, status) in self._aids.items()}
            | {aid: self._service_entry(aid) for aid in self._services},
            "groups": {gid: g.view() for gid, g in self._groups.items()},
        }
        connection = self._data_connections.get(client.client_id)
        if connection is not None:
            await connection.send(control_event(DIRECTORY_TYPE, snapshot))

    async def _process_event(self, event: cloudevent_pb2.CloudEvent) -> None:
        if self._services and event.type.startswith(INBOX_PREFIX):
            service = self._services.get(event.type[len(INBOX_PREFIX) :])
            if service is not None:
                await self._route_to_instance(service, event)
                return
        topic = TopicId(event.type, event.source)
        recipients = await self._subscription_manager.get_subscribed_recipients(topic)
        clients = {self._agent_type_to_client_id.get(r.type) for r in recipients} - {None}
        connections = [self._data_connections.get(c) for c in clients if c is not None]
        live = [c for c in connections if c is not None]
        if not live:
            self.stats.not_delivered += 1
            if ORIGIN_ATTR in event.attributes:
                logger.info("host: nobody holds %s now; its sender keeps the message and sends it again", event.type)
            else:
                logger.warning("host: dead letter: no subscriber for topic %r (a plain publish, dropped)", event.type[:200])
            return
        self.stats.events_routed += 1
        message = agent_worker_pb2.Message(cloudEvent=event)
        for connection in live:
            await connection.send(message)

    async def _on_client_disconnect(self, client_id: str) -> None:
        await super()._on_client_disconnect(client_id)
        self._client_id_to_subscription_id_mapping.pop(client_id, None)
        client = self._clients.pop(client_id, None)
        self.stats.workers_connected = self._workers_connected()
        if client is None or not client.greeted:
            return
        self.stats.disconnects += 1
        away = {aid: [w, AWAY] for aid, (w, c, _) in self._aids.items() if c == client_id}
        for aid in away:
            w, c, _ = self._aids[aid]
            self._aids[aid] = (w, c, AWAY)
        for aid, service in self._services.items():
            if service.lost(client_id) is not None:
                away[aid] = self._service_entry(aid)
        logger.info("host: worker %s disconnected; %d AIDs away", client.worker, len(away))
        await self._push({"aids": away})

    # -- control stream (autogen-ext's; the AUN workers do not use it) -------------------------------

    async def _receive_control_message(self, client_id: str, message: agent_worker_pb2.ControlMessage | None) -> None:
        try:
            if message is None:
                raise ValueError("bytes that are not an agents.ControlMessage")
            await super()._receive_control_message(client_id, message)
        except ValueError as exc:
            if client_id not in self._control_warned:
                if len(self._control_warned) > 1000:
                    self._control_warned.clear()
                self._control_warned.add(client_id)
                logger.warning("host: dropped a control message from client %s: %s", client_id[:8], exc)

    # -- registration ------------------------------------------------------------------------------

    async def RegisterAgent(
        self, request: agent_worker_pb2.RegisterAgentTypeRequest | None, context: Any
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        return await self._unary("RegisterAgent", request, context, self._register_agent)

    async def _register_agent(
        self, request: agent_worker_pb2.RegisterAgentTypeRequest, context: Any
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        client_id, client = self._caller(context)
        agent_type: str = request.type
        if len(agent_type) > _MAX_AGENT_TYPE_LENGTH or not _AGENT_TYPE.match(agent_type):
            raise Refusal(_Status.INVALID_ARGUMENT, f"{agent_type[:100]!r} is not an agent type (letters, digits, '_', '-', '.')")
        worker = client.worker if client is not None else None
        if agent_type.startswith(AUN_PREFIX) and (worker is None or agent_type != WORKER_AGENT_PREFIX + worker):
            raise Refusal(
                _Status.PERMISSION_DENIED,
                f"{agent_type} is one of the runtime's own types: a worker registers only {WORKER_AGENT_PREFIX}<its own name>",
            )
        metadata = _metadata(context)
        policy = metadata.get(SERVICE_METADATA)
        if policy is not None or agent_type in self._services:
            return await self._register_instance(client_id, client, agent_type, policy, metadata.get(SERVICE_SECRET_METADATA))
        claim = self._aids.get(agent_type)
        if claim is not None and claim[0] != worker:
            owner, _, status = claim
            if status == HELD:
                raise Refusal(_Status.ALREADY_EXISTS, f"{agent_type} is held by the live worker {owner}")
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{agent_type} belongs to worker {owner}, which is away: messages to it are kept for that worker, "
                "and no other worker may register it until that one leaves",
            )
        current = self._agent_type_to_client_id.get(agent_type)
        if current is not None and current != client_id:
            holder = self._clients.get(current)
            if holder is not None and worker is not None and holder.worker == worker:
                # The same worker (same name, same secret) on a new connection: the old one is dead
                # or dying. Take over.
                logger.info("host: worker %s reconnected; its old connection is let go", worker)
                await self._on_client_disconnect(current)
            elif holder is not None and holder.worker is not None:
                raise Refusal(_Status.ALREADY_EXISTS, f"{agent_type} is held by the live worker {holder.worker}")
            else:  # a plain client holds it, or a closing connection still does: the caller may retry
                raise Refusal(
                    _Status.INVALID_ARGUMENT, f"{agent_type} is registered on another connection", level=logging.DEBUG
                )
        async with self._agent_type_to_client_id_lock:
            existing = self._agent_type_to_client_id.get(agent_type)
            if existing is not None and existing != client_id:
                raise Refusal(_Status.INVALID_ARGUMENT, f"{agent_type} is registered on another connection", level=logging.DEBUG)
            self._agent_type_to_client_id[agent_type] = client_id
        if client is not None:
            client.types.add(agent_type)
        response = agent_worker_pb2.RegisterAgentTypeResponse()
        if worker is None or agent_type.startswith(WORKER_AGENT_PREFIX):
            return response
        self.stats.registrations += 1
        self._aids[agent_type] = (worker, client_id, HELD)
        await self._remember()
        logger.info("host: worker %s registered %s", worker, agent_type)
        await self._push({"aids": {agent_type: [worker, HELD]}})
        return response

    async def _register_instance(
        self, client_id: str, client: _Client | None, aid: str, policy: str | None, secret: str | None
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        """A worker registers an instance of the service AID `aid` (`policy` None: it asked for a
        plain registration of an AID that is a service), proving with `secret` that it shares the
        instances' ledger."""
        if client is None or client.worker is None:
            raise Refusal(_Status.PERMISSION_DENIED, f"{aid} is a service AID: only workers register its instances")
        worker = client.worker
        service = self._services.get(aid)
        if policy is None:
            assert service is not None
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{aid} is a service AID ({service.policy}) of workers {', '.join(sorted(service.instances))}: "
                f"register it as a service instance with policy {service.policy}, or use another AID",
            )
        if policy not in POLICIES:
            raise Refusal(_Status.INVALID_ARGUMENT, f"unknown service policy {policy[:40]!r}; one of {', '.join(POLICIES)}")
        claim = self._aids.get(aid)
        holder = self._agent_type_to_client_id.get(aid)
        if claim is not None or holder is not None:
            owner = claim[0] if claim is not None else "a plain client"
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{aid} is held as a plain AID by {'worker ' if claim is not None else ''}{owner}: it cannot be a service "
                "AID until that holder leaves",
            )
        if not secret:
            raise Refusal(_Status.PERMISSION_DENIED, f"a service instance of {aid} presents the service's secret ({SERVICE_SECRET_METADATA})")
        if service is not None and not service.admits(secret):
            raise Refusal(
                _Status.PERMISSION_DENIED,
                f"{aid}: this is not the secret of the service's instances (the file beside their ledger,"
                " <aid>.service.sqlite.secret): an instance must share their ledger",
            )
        if service is not None and service.policy != policy:
            raise Refusal(
                _Status.ALREADY_EXISTS,
                f"{aid} is a service AID with policy {service.policy}, not {policy}: every instance uses the same policy",
            )
        if service is None:
            service = self._services[aid] = ServiceRoute(policy, secret_digest(secret))
        service.join(worker, client_id)
        client.types.add(aid)
        await self._remember()
        self.stats.registrations += 1
        logger.info("host: worker %s registered %s as an instance (%s, %d live)", worker, aid, policy, len(service.live()))
        await self._push({"aids": {aid: self._service_entry(aid)}})
        return agent_worker_pb2.RegisterAgentTypeResponse()

    def _service_entry(self, aid: str) -> list[Any]:
        """A service AID in the directory: held while any instance is live, with its instances."""
        service = self._services[aid]
        return ["service", HELD if service.live() else AWAY, service.view()]

    async def _route_to_instance(self, service: ServiceRoute, event: cloudevent_pb2.CloudEvent) -> None:
        origin = event.attributes.get(ORIGIN_ATTR)
        client_id = service.pick(origin.ce_string if origin is not None else None)
        connection = self._data_connections.get(client_id) if client_id is not None else None
        if connection is None:
            self.stats.not_delivered += 1
            logger.info("host: no live instance of %s now; its sender keeps the message and sends it again", event.type)
            return
        self.stats.events_routed += 1
        await connection.send(agent_worker_pb2.Message(cloudEvent=event))

    async def AddSubscription(
        self, request: agent_worker_pb2.AddSubscriptionRequest | None, context: Any
    ) -> agent_worker_pb2.AddSubscriptionResponse:
        return await self._unary("AddSubscription", request, context, self._add_subscription)

    async def _add_subscription(
        self, request: agent_worker_pb2.AddSubscriptionRequest, context: Any
    ) -> agent_worker_pb2.AddSubscriptionResponse:
        client_id, client = self._caller(context)
        try:
            subscription = subscription_from_proto(request.subscription)
        except ValueError:
            raise Refusal(_Status.INVALID_ARGUMENT, "a subscription is a typeSubscription or a typePrefixSubscription") from None
        self._check_subscription(client, subscription)
        if subscription.agent_type in self._services:  # type: ignore[attr-defined]
            # A service AID's deliveries are routed to its instances by the host, not by
            # subscription (and autogen-core keeps one subscription per topic and agent type).
            return agent_worker_pb2.AddSubscriptionResponse()
        scoped: Subscription
        if isinstance(subscription, TypeSubscription):
            scoped = TypeSubscription(subscription.topic_type, subscription.agent_type, id=_scoped(client_id, subscription.id))
        else:
            assert isinstance(subscription, TypePrefixSubscription)
            scoped = TypePrefixSubscription(
                subscription.topic_type_prefix, subscription.agent_type, id=_scoped(client_id, subscription.id)
            )
        try:
            await self._subscription_manager.add_subscription(scoped)
        except ValueError as exc:
            raise Refusal(_Status.INVALID_ARGUMENT, str(exc)) from None
        self._client_id_to_subscription_id_mapping.setdefault(client_id, set()).add(scoped.id)
        return agent_worker_pb2.AddSubscriptionResponse()

    def _check_subscription(self, client: _Client | None, subscription: Subscription) -> None:
        """`aun.*` topics only for what the stream holds: its AIDs' inboxes and groups, its own
        acknowledgements. And nobody subscribes another worker's AID to anything."""
        worker = client.worker if client is not None else None
        types = client.types if client is not None else set()
        agent_type: str = getattr(subscription, "agent_type", "")
        if isinstance(subscription, TypeSubscription):
            topic = subscription.topic_type
            reserved = topic.startswith(AUN_PREFIX)
            allowed = agent_type in types and (
                topic == INBOX_PREFIX + agent_type
                or topic.startswith(GROUP_PREFIX)
                or (worker is not None and topic == ACK_PREFIX + worker and agent_type == WORKER_AGENT_PREFIX + worker)
            )
        else:
            topic = getattr(subscription, "topic_type_prefix", "")
            reserved = topic.startswith(AUN_PREFIX) or AUN_PREFIX.startswith(topic)
            allowed = False
        if reserved and not allowed:
            raise Refusal(
                _Status.PERMISSION_DENIED,
                f"topic {topic[:100]!r} is the runtime's own: a stream subscribes to it only for the AIDs registered on it",
            )
        owned = agent_type in self._aids or agent_type in self._services
        if (owned or agent_type.startswith(AUN_PREFIX)) and agent_type not in types:
            raise Refusal(_Status.PERMISSION_DENIED, f"{agent_type[:100]!r} is not registered on this stream")

    async def RemoveSubscription(
        self, request: agent_worker_pb2.RemoveSubscriptionRequest | None, context: Any
    ) -> agent_worker_pb2.RemoveSubscriptionResponse:
        return await self._unary("RemoveSubscription", request, context, self._remove_subscription)

    async def _remove_subscription(
        self, request: agent_worker_pb2.RemoveSubscriptionRequest, context: Any
    ) -> agent_worker_pb2.RemoveSubscriptionResponse:
        client_id, _ = self._caller(context)
        scoped = _scoped(client_id, request.id)
        own = self._client_id_to_subscription_id_mapping.get(client_id, set())
        if scoped not in own:
            raise Refusal(_Status.NOT_FOUND, f"this connection has no subscription {request.id[:100]!r}")
        await self._subscription_manager.remove_subscription(scoped)
        own.discard(scoped)
        return agent_worker_pb2.RemoveSubscriptionResponse()

    async def GetSubscriptions(
        self, request: agent_worker_pb2.GetSubscriptionsRequest | None, context: Any
    ) -> agent_worker_pb2.GetSubscriptionsResponse:
        return await self._unary("GetSubscriptions", request, context, self._get_subscriptions)

    async def _get_subscriptions(
        self, request: agent_worker_pb2.GetSubscriptionsRequest, context: Any
    ) -> agent_worker_pb2.GetSubscriptionsResponse:
        """The caller's own subscriptions (with the ids it gave them)."""
        client_id, _ = self._caller(context)
        own = self._client_id_to_subscription_id_mapping.get(client_id, set())
        prefix = _scoped(client_id, "")
        found = []
        for subscription in self._subscription_manager.subscriptions:
            if subscription.id in own:
                proto = subscription_to_proto(subscription)
                proto.id = subscription.id[len(prefix) :]
                found.append(proto)
        return agent_worker_pb2.GetSubscriptionsResponse(subscriptions=found)

    # -- directory service -------------------------------------------------------------------------

    async def group_call(self, request: Any, context: Any) -> dict[str, Any]:
        return await self._unary("Group", request, context, self._group_call)

    async def _group_call(self, request: Any, context: Any) -> dict[str, Any]:
        worker = self._worker_caller(context).worker
        assert worker is not None
        _check_group_request(request)
        op, group_id = request["op"], request["group"]
        group = self._groups.get(group_id)
        if op in ("create", "announce"):
            if op == "create" and group is not None and self._holder_live(group.holder) and group.holder != worker:
                return {"error": "exists", "message": f"group {group_id} already exists (held by worker {group.holder})"}
            if op == "create" and group is not None and group.holder == worker and self._holder_live(worker):
                return {"error": "exists", "message": f"group {group_id} already exists"}
            group = self._groups[group_id] = _Group(worker, request["mode"], set(request["members"]))
            logger.info("host: worker %s %s group %s", worker, "created" if op == "create" else "announced", group_id)
        elif group is None:
            return {"error": "unknown", "message": f"no group {group_id!r}; create it with create_group()"}
        elif op == "add":
            group.members.add(request["aid"])
        elif op == "remove":
            group.members.discard(request["aid"])
        else:
            group.mode = request["mode"]
        await self._remember()
        await self._push({"groups": {group_id: group.view()}})
        return {"group": group.view()}

    async def leave_call(self, request: Any, context: Any) -> dict[str, Any]:
        return await self._unary("Leave", request, context, self._leave_call)

    async def _leave_call(self, request: Any, context: Any) -> dict[str, Any]:
        """A worker stops for good: its AIDs and groups are released, not kept for, and its name
        may be bound to another secret from now on."""
        client = self._worker_caller(context)
        worker = client.worker
        assert worker is not None
        groups = request.get("groups", []) if isinstance(request, dict) else None
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise Refusal(_Status.INVALID_ARGUMENT, 'a Leave call is {"groups": ["<group id>", ...]}')
        # Let go of its registrations now, not when the connection closes: the next worker to
        # register the same AIDs must not find them taken.
        await super()._on_client_disconnect(client.client_id)
        self._client_id_to_subscription_id_mapping.pop(client.client_id, None)
        released = [aid for aid, (w, _, _) in self._aids.items() if w == worker]
        for aid in released:
            del self._aids[aid]
        changed: dict[str, Any] = dict.fromkeys(released)
        for aid, service in list(self._services.items()):
            if worker in service.instances:
                if service.leave(worker):
                    del self._services[aid]
                    changed[aid] = None
                else:
                    changed[aid] = self._service_entry(aid)
        left = [g for g in groups if g in self._groups and self._groups[g].holder == worker]
        for group_id in left:
            del self._groups[group_id]
        self.identities.forget(worker)
        await self._remember()
        logger.info("host: worker %s left; released %d AIDs and %d groups", worker, len(released), len(left))
        await self._push({"aids": changed, "groups": dict.fromkeys(left)})
        return {"released": released}

    async def stats_call(self, request: Any, context: Any) -> dict[str, Any]:
        return await self._unary("Stats", request, context, self._stats_call)

    async def _stats_call(self, request: Any, context: Any) -> dict[str, Any]:
        """Counters and the directory. Worker names are not secrets (every worker's directory and
        every delivery carry them); what proves a name, its secret, is never shown."""
        if not isinstance(request, dict):
            raise Refusal(_Status.INVALID_ARGUMENT, "a Stats call takes a JSON object ({})")
        return {
            "stats": self.stats.__dict__,
            "workers": sorted({c.worker for c in self._clients.values() if c.greeted and c.worker is not None}),
            "aids": {aid: [w, s] for aid, (w, _, s) in sorted(self._aids.items())},
            "groups": {gid: g.view() for gid, g in sorted(self._groups.items())},
            "services": {aid: s.view() for aid, s in sorted(self._services.items())},
        }

    def _holder_live(self, worker: str) -> bool:
        return any(c.greeted and c.worker == worker for c in self._clients.values())

    def _workers_connected(self) -> int:
        return sum(1 for c in self._clients.values() if c.greeted)

    async def _push(self, change: dict[str, Any]) -> None:
        message = control_event(DIRECTORY_TYPE, change)
        for client in list(self._clients.values()):
            connection = self._data_connections.get(client.client_id) if client.greeted else None
            if connection is not None:
                await connection.send(message)


def _check_group_request(request: Any) -> None:
    """A Group call, checked before anything is changed: what is pushed to every worker must be
    something every worker can read."""
    if not isinstance(request, dict):
        raise Refusal(_Status.INVALID_ARGUMENT, "a Group call takes a JSON object")
    op = request.get("op")
    if op not in _GROUP_OPS:
        raise Refusal(_Status.INVALID_ARGUMENT, f"unknown group operation {str(op)[:40]!r}; one of {', '.join(sorted(_GROUP_OPS))}")
    try:
        validate_group_id(request.get("group"))  # type: ignore[arg-type]
        if op in ("add", "remove"):
            validate_aid(request.get("aid"))  # type: ignore[arg-type]
        if op in ("create", "announce"):
            members = request.get("members")
            if not isinstance(members, list):
                raise Refusal(_Status.INVALID_ARGUMENT, f"a {op} call lists its members")
            for member in members:
                validate_aid(member)
    except AUNError as exc:
        raise Refusal(_Status.INVALID_ARGUMENT, str(exc)[:200]) from None
    if op in ("create", "announce", "mode") and request.get("mode") not in _MODES:
        raise Refusal(_Status.INVALID_ARGUMENT, f"a group's mode is one of {', '.join(sorted(_MODES))}")


# -- the handlers the server registers -----------------------------------------------------------------


def _parse_or_none(message_type: Any) -> Callable[[bytes], Any]:
    """A request parser that never raises: bytes that are not a `message_type` give None, which
    the servicer answers with `INVALID_ARGUMENT` (instead of grpc logging a traceback)."""
    from_string = message_type.FromString

    def parse(data: bytes) -> Any:
        try:
            return from_string(data)
        except Exception:  # protobuf's DecodeError, or whatever else these bytes provoke
            return None

    return parse


def _json_or_malformed(data: bytes) -> Any:
    try:
        return decode_json(data)
    except ValueError:
        return _MALFORMED


def rpc_handlers(servicer: AUNHostServicer) -> tuple[grpc.GenericRpcHandler, ...]:
    """autogen-ext's `AgentRpc` service (its methods, with parsers that never raise) and the
    host's JSON `aun.Directory` service."""
    pb = agent_worker_pb2

    def unary(method: Any, request: Any, response: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            method, request_deserializer=_parse_or_none(request), response_serializer=response.SerializeToString
        )

    def stream(method: Any, message: Any) -> grpc.RpcMethodHandler:
        return grpc.stream_stream_rpc_method_handler(
            method, request_deserializer=_parse_or_none(message), response_serializer=message.SerializeToString
        )

    def json(method: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            method, request_deserializer=_json_or_malformed, response_serializer=encode_json
        )

    agent_rpc = {
        "OpenChannel": stream(servicer.OpenChannel, pb.Message),
        "OpenControlChannel": stream(servicer.OpenControlChannel, pb.ControlMessage),
        "RegisterAgent": unary(servicer.RegisterAgent, pb.RegisterAgentTypeRequest, pb.RegisterAgentTypeResponse),
        "AddSubscription": unary(servicer.AddSubscription, pb.AddSubscriptionRequest, pb.AddSubscriptionResponse),
        "RemoveSubscription": unary(
            servicer.RemoveSubscription, pb.RemoveSubscriptionRequest, pb.RemoveSubscriptionResponse
        ),
        "GetSubscriptions": unary(servicer.GetSubscriptions, pb.GetSubscriptionsRequest, pb.GetSubscriptionsResponse),
    }
    directory = {
        "Group": json(servicer.group_call),
        "Leave": json(servicer.leave_call),
        "Stats": json(servicer.stats_call),
    }
    return (
        grpc.method_handlers_generic_handler("agents.AgentRpc", agent_rpc),
        grpc.method_handlers_generic_handler(DIRECTORY_SERVICE, directory),
    )
