"""The host's servicer: autogen-ext's, with AUN rules, a directory, lifecycle lines and counters.

On top of autogen-ext's routing it:

* **authenticates workers**: a stream that names a worker must present that worker's secret (see
  `._identity`); the first secret seen for a name is remembered, and a later stream claiming
  the name with another one is refused with `UNAUTHENTICATED`. Every other call of a worker is
  bound to its open stream (`client-id`) and carries the same proof;
* **refuses RPC**: an `RpcRequest` is answered at once with an error (a remote worker may still
  try; AUN has no request/response), instead of being forwarded (or hanging forever);
* **keeps the directory**: which worker holds which AID (held, or *away* when its worker vanished
  without leaving) and every group, sent to each worker as a snapshot and then as changes (see
  `._host_directory`). An AID belongs to the worker that registered it until that worker leaves:
  the same worker, restarted (same name, same secret), takes it back at once; no other worker can
  take it, held or away (see `._host_registration`);
* **keeps the runtime's own names to the runtime**: a stream may send deliveries only as its own
  worker (`aunorigin`), acknowledge only deliveries to AIDs registered on it, register only its
  own `aun.worker.<name>` type, and subscribe `aun.*` topics only for the AIDs it holds (see
  `._host_stream_rules`); subscriptions are kept per connection, so one client cannot remove or
  shadow another's (see `._host_subscriptions`);
* **routes service AIDs**: an AID that several workers register as *instances* (with the
  `aun-service` metadata naming its routing policy) gets each delivery on one live instance as
  the policy says (see `._service_routing`, `._host_routing`); a plain AID keeps its one holder, and a
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
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHostServicer
from autogen_ext.runtimes.grpc.protos import agent_worker_pb2, cloudevent_pb2

from ._frames import BATCH_TYPE, drain, pack
from ._heartbeat import watch
from ._host_directory import HostDirectory, check_group_request
from ._host_records import HostStats, Refusal, StreamClient, call_metadata, caller_name
from ._host_registration import HostRegistration
from ._host_routing import HostRouter
from ._host_state import HostState
from ._host_stream_rules import StreamRules
from ._host_streams import END, DataConnection, HostStreams
from ._host_subscriptions import HostSubscriptions
from ._wire import DIRECTORY_SERVICE, DIRECTORY_TYPE, HELLO_TYPE, control_event, decode_json, encode_json

__all__ = ["AUNHostServicer", "HostStats", "rpc_handlers"]

logger = logging.getLogger("aun_runtime.distributed")

_Status = grpc.StatusCode
#: What the JSON service's request parser gives for bytes that are not JSON.
_MALFORMED = object()

R = TypeVar("R")


class AUNHostServicer(GrpcWorkerAgentRuntimeHostServicer):
    """autogen-ext's host servicer with the AUN additions described in the module docstring.

    It keeps autogen-ext's gRPC interface (the calls, the data stream's loop, the clean end) and
    hands each concern to a part it holds: the directory (`._host_directory`), the open streams
    (`._host_streams`), the rules of what a stream may do (`._host_stream_rules`), routing
    (`._host_routing`), registration (`._host_registration`) and subscriptions
    (`._host_subscriptions`). The parts share autogen-ext's maps of connections, agent types and
    subscriptions, never a copy of them."""

    def __init__(self, state: HostState | None = None) -> None:
        super().__init__()
        self.stats = HostStats()
        self._directory = HostDirectory(state)
        self.identities = self._directory.identities
        self._streams = HostStreams(self.identities, self._data_connections)
        self._rules = StreamRules(self.stats)
        self._router = HostRouter(
            self.stats,
            self._directory.services,
            self._subscription_manager,
            self._agent_type_to_client_id,
            self._data_connections,
            self._background_tasks,
        )
        self._registration = HostRegistration(
            self.stats,
            self._rules,
            self._directory,
            self._streams,
            self._agent_type_to_client_id,
            self._agent_type_to_client_id_lock,
            self._on_client_disconnect,
        )
        self._subscriptions = HostSubscriptions(
            self._rules, self._directory, self._subscription_manager, self._client_id_to_subscription_id_mapping
        )
        # Bound once: each message on a stream is checked and routed without a hop through the parts.
        self._checked_event = self._rules.checked_event
        self._route = self._router.route
        self._control_warned: set[str] = set()
        self._streams_ended: asyncio.Event | None = None  # set by `end_streams`: the last stream has ended

    async def end_streams(self, timeout: float) -> None:
        """End every data stream from this side, each call with status OK, and wait up to `timeout`
        seconds for them to close. (A stream still open when the server stops is cancelled, which
        gRPC logs as an error, with a traceback, for each.)"""
        self._streams_ended = asyncio.Event()
        if not self._data_connections:
            return
        for connection in list(self._data_connections.values()):
            await connection.send(END)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._streams_ended.wait(), timeout)

    def close_state(self) -> None:
        self._directory.close()

    # -- refusing ----------------------------------------------------------------------------------

    async def _abort(self, context: Any, what: str, refusal: Refusal) -> NoReturn:
        self.stats.refused += 1
        logger.log(refusal.level, "host: refused %s from %s: %s %s", what, caller_name(context), refusal.code.name, refusal.message)
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

    # -- data stream -------------------------------------------------------------------------------

    async def OpenChannel(
        self, request_iterator: AsyncIterator[agent_worker_pb2.Message | None], context: Any
    ) -> AsyncIterator[agent_worker_pb2.Message]:
        """The data stream of one connection: what autogen-ext's host does, minus eager logging,
        plus the identity check and the AUN rules on what arrives."""
        try:
            client = self._streams.open(context)
            await self._directory.remember()  # a name bound for the first time is bound for good
        except Refusal as refusal:
            await self._abort(context, "a data stream", refusal)
            return
        client_id = client.client_id

        async def handle(message: agent_worker_pb2.Message | None) -> None:
            await self._receive_message(client, message)

        async def silent(seconds: float) -> None:
            connection.silence = f"nothing from worker {client.worker} for {seconds:.1f} s (no heartbeat from its event loop)"
            logger.warning("host: %s: dropping its connection", connection.silence)
            await connection.send(END)

        watching = asyncio.get_running_loop().create_task(
            watch(lambda: client.heard if client.heartbeat else time.monotonic(), silent)
        )
        try:
            connection = DataConnection(request_iterator, client_id, handle_callback=handle)  # type: ignore[arg-type]
            self._data_connections[client_id] = connection
            async for first in connection:
                # A worker that reads frames gets what waits for it by now in one write (see ._frames).
                for message in pack(drain(first, connection.queued)) if client.frames else (first,):
                    if message is END:
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

    async def _receive_message(self, client: StreamClient, message: agent_worker_pb2.Message | None) -> None:  # type: ignore[override]
        client.heard = time.monotonic()  # anything on the stream was written by the worker's event loop
        if message is None:
            raise Refusal(_Status.INVALID_ARGUMENT, "the data stream carried bytes that are not an agents.Message")
        kind = message.WhichOneof("message")
        if kind == "cloudEvent":
            event = message.cloudEvent
            topic = event.type
            if topic == BATCH_TYPE:
                self._route(self._rules.frame_events(client, event))
            elif topic == HELLO_TYPE:
                await self._hello(client, event)
            else:
                checked = self._checked_event(client, event)
                if checked is not None:
                    self._route((checked,))
        elif kind == "request":
            await self._router.refuse_rpc(client, message.request)
        elif kind == "response":
            client.warn_once("response", "host: dropped an RPC response from %s: the host forwards no RPC, so it awaits none", client.who)
        else:
            raise Refusal(_Status.INVALID_ARGUMENT, "an empty message on the data stream")

    async def _hello(self, client: StreamClient, event: cloudevent_pb2.CloudEvent) -> None:
        self._rules.read_hello(client, event)
        if not client.greeted:
            client.greeted = True
            self.stats.connects += 1
            self.stats.workers_connected = self._streams.workers_connected()
            logger.info("host: worker %s connected (client %s)", client.worker, client.client_id[:8])
        snapshot = {
            "snapshot": True,
            "frames": True,  # this host reads batch frames: the worker may send them (see ._frames)
            "heartbeat": True,  # this host reads heartbeats: the worker sends them (see ._heartbeat)
        } | self._directory.snapshot()
        await self._streams.send(client.client_id, control_event(DIRECTORY_TYPE, snapshot))

    async def _process_event(self, event: cloudevent_pb2.CloudEvent) -> None:
        await self._router.process_event(event)

    async def _on_client_disconnect(self, client_id: str) -> None:
        await super()._on_client_disconnect(client_id)
        self._client_id_to_subscription_id_mapping.pop(client_id, None)
        client = self._streams.clients.pop(client_id, None)
        self.stats.workers_connected = self._streams.workers_connected()
        if client is None or not client.greeted:
            return
        self.stats.disconnects += 1
        away = self._directory.let_go(client_id)
        logger.info("host: worker %s disconnected; %d AIDs away", client.worker, len(away))
        await self._streams.push({"aids": away})

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

    # -- registration and subscriptions ------------------------------------------------------------

    async def RegisterAgent(
        self, request: agent_worker_pb2.RegisterAgentTypeRequest | None, context: Any
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        return await self._unary("RegisterAgent", request, context, self._register_agent)

    async def _register_agent(
        self, request: agent_worker_pb2.RegisterAgentTypeRequest, context: Any
    ) -> agent_worker_pb2.RegisterAgentTypeResponse:
        client_id, client = self._streams.caller(context)
        return await self._registration.register(client_id, client, request.type, call_metadata(context))

    async def AddSubscription(
        self, request: agent_worker_pb2.AddSubscriptionRequest | None, context: Any
    ) -> agent_worker_pb2.AddSubscriptionResponse:
        return await self._unary("AddSubscription", request, context, self._add_subscription)

    async def _add_subscription(
        self, request: agent_worker_pb2.AddSubscriptionRequest, context: Any
    ) -> agent_worker_pb2.AddSubscriptionResponse:
        client_id, client = self._streams.caller(context)
        await self._subscriptions.add(client_id, client, request.subscription)
        return agent_worker_pb2.AddSubscriptionResponse()

    async def RemoveSubscription(
        self, request: agent_worker_pb2.RemoveSubscriptionRequest | None, context: Any
    ) -> agent_worker_pb2.RemoveSubscriptionResponse:
        return await self._unary("RemoveSubscription", request, context, self._remove_subscription)

    async def _remove_subscription(
        self, request: agent_worker_pb2.RemoveSubscriptionRequest, context: Any
    ) -> agent_worker_pb2.RemoveSubscriptionResponse:
        client_id, _ = self._streams.caller(context)
        await self._subscriptions.remove(client_id, request.id)
        return agent_worker_pb2.RemoveSubscriptionResponse()

    async def GetSubscriptions(
        self, request: agent_worker_pb2.GetSubscriptionsRequest | None, context: Any
    ) -> agent_worker_pb2.GetSubscriptionsResponse:
        return await self._unary("GetSubscriptions", request, context, self._get_subscriptions)

    async def _get_subscriptions(
        self, request: agent_worker_pb2.GetSubscriptionsRequest, context: Any
    ) -> agent_worker_pb2.GetSubscriptionsResponse:
        """The caller's own subscriptions (with the ids it gave them)."""
        client_id, _ = self._streams.caller(context)
        return agent_worker_pb2.GetSubscriptionsResponse(subscriptions=self._subscriptions.listed(client_id))

    # -- directory service -------------------------------------------------------------------------

    async def group_call(self, request: Any, context: Any) -> dict[str, Any]:
        return await self._unary("Group", request, context, self._group_call)

    async def _group_call(self, request: Any, context: Any) -> dict[str, Any]:
        worker = self._streams.worker_caller(context).worker
        assert worker is not None
        check_group_request(request)
        error = self._directory.change_group(worker, request, self._streams.live)
        if error is not None:
            return error
        group_id = request["group"]
        group = self._directory.groups[group_id]
        await self._directory.remember()
        await self._streams.push({"groups": {group_id: group.view()}})
        return {"group": group.view()}

    async def leave_call(self, request: Any, context: Any) -> dict[str, Any]:
        return await self._unary("Leave", request, context, self._leave_call)

    async def _leave_call(self, request: Any, context: Any) -> dict[str, Any]:
        """A worker stops for good: its AIDs and groups are released, not kept for, and its name
        may be bound to another secret from now on."""
        client = self._streams.worker_caller(context)
        worker = client.worker
        assert worker is not None
        groups = request.get("groups", []) if isinstance(request, dict) else None
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise Refusal(_Status.INVALID_ARGUMENT, 'a Leave call is {"groups": ["<group id>", ...]}')
        # Let go of its registrations now, not when the connection closes: the next worker to
        # register the same AIDs must not find them taken.
        await super()._on_client_disconnect(client.client_id)
        self._client_id_to_subscription_id_mapping.pop(client.client_id, None)
        released, changed, left = self._directory.leave(worker, groups)
        await self._directory.remember()
        logger.info("host: worker %s left; released %d AIDs and %d groups", worker, len(released), len(left))
        await self._streams.push({"aids": changed, "groups": dict.fromkeys(left)})
        return {"released": released}

    async def stats_call(self, request: Any, context: Any) -> dict[str, Any]:
        return await self._unary("Stats", request, context, self._stats_call)

    async def _stats_call(self, request: Any, context: Any) -> dict[str, Any]:
        """Counters and the directory. Worker names are not secrets (every worker's directory and
        every delivery carry them); what proves a name, its secret, is never shown."""
        if not isinstance(request, dict):
            raise Refusal(_Status.INVALID_ARGUMENT, "a Stats call takes a JSON object ({})")
        return {"stats": self.stats.__dict__, "workers": self._streams.workers()} | self._directory.view()


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
