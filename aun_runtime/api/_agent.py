"""`AUNAgent`: an autogen-core `RoutedAgent` that behaves as AUN says an agent behaves.

The actor rules, as the code enforces them:

* **Events only.** A handler is an `@event`; a class that declares an `@rpc` or
  `@message_handler` handler is refused when it is defined. Nobody can ask an AUN agent for a
  return value, because a receiver has no obligation to respond.
* **One message at a time.** Each agent has a mailbox: messages are handled one by one, in arrival
  order, and at most `capacity` of them may wait (see `aun_runtime.delivery._mailbox`).
* **Replies are acts.** An agent answers by calling its send tool: [`AUNAgent.send`][aun_runtime.AUNAgent.send],
  [`AUNAgent.group_send`][aun_runtime.AUNAgent.group_send] or [`AUNAgent.reply`][aun_runtime.AUNAgent.reply], zero, one or many times, while handling a
  message or later, and it may speak first ([`AUNAgent.on_start`][aun_runtime.AUNAgent.on_start], [`AUNAgent.schedule`][aun_runtime.AUNAgent.schedule]).
* **Thinking stays inside.** [`AUNAgent.think`][aun_runtime.AUNAgent.think] records reasoning in the archive; it is never sent.
* **Tool annotations oblige nothing.** A `tool_call` or `tool_result` payload describes the
  sender's own tool use; receiving one runs nothing here (a handler may look at it, like any payload).

Handlers receive either the envelope or the typed contract inside it: declare
`message: AUNMessage` to get every message, or `message: SomeContract` to get json payloads
of that contract decoded. The envelope of the message being handled is always [`AUNAgent.inbound`][aun_runtime.AUNAgent.inbound].

Example:
    ```python
    class Echo(AUNAgent):
        @event
        async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
            if message.text:
                await self.reply(f"you said: {message.text}")
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeAlias, TypeVar, get_type_hints, overload

from autogen_core import AgentId, AgentInstantiationContext, CancellationToken, MessageContext, RoutedAgent
from autogen_core import event as _autogen_event

from protocols.aun import AUNMessage, JsonPayload, Mention, TextPayload, replies_name_the_sender
from protocols.contract import decode_contract

from ..base._autogen_internals import MessageHandler
from ..base._errors import (
    AgentRegistrationError,
    BudgetExceeded,
    HandlerDefinitionError,
    HopLimitExceeded,
    RPCForbiddenError,
    TransientError,
)
from ..delivery._acting import ACTING, INBOUND, repeating, run_proactive
from ..delivery._endpoint import Endpoint
from ..delivery._turn_retry import TurnRetry, derived_message_id
from ..storage._archive import ArchiveRecord, RecordKind

if TYPE_CHECKING:
    from ..base._payload import PayloadLike
    from ..delivery._agent_host import AgentHost
    from ..delivery._turns import Turn

__all__ = ["AUNAgent", "AgentFactory", "AgentMaker", "event"]

logger = logging.getLogger("aun_runtime")

def _is_event_handler(handler: Any) -> bool:
    # autogen-core marks @event, @rpc and @message_handler alike; only the router tells them apart.
    # @event's router is the lambda defined inside autogen_core's ``event`` decorator (pinned 0.7.5;
    # tests/test_agent.py guards this against a version that changes it).
    router = getattr(handler, "router", None)
    return getattr(router, "__qualname__", "").startswith("event.")


_AgentT = TypeVar("_AgentT")
_ReceivesT = TypeVar("_ReceivesT")
_HandlerFunction = Callable[[_AgentT, _ReceivesT, MessageContext], Coroutine[Any, Any, None]]


@overload
def event(func: _HandlerFunction[_AgentT, _ReceivesT]) -> MessageHandler[_AgentT, _ReceivesT, None]: ...


@overload
def event(
    func: None = None, *, match: Callable[[_ReceivesT, MessageContext], bool] | None = ..., strict: bool = ...
) -> Callable[[_HandlerFunction[_AgentT, _ReceivesT]], MessageHandler[_AgentT, _ReceivesT, None]]: ...


def event(
    func: _HandlerFunction[_AgentT, _ReceivesT] | None = None,
    *,
    match: Callable[[_ReceivesT, MessageContext], bool] | None = None,
    strict: bool = True,
) -> (
    MessageHandler[_AgentT, _ReceivesT, None]
    | Callable[[_HandlerFunction[_AgentT, _ReceivesT]], MessageHandler[_AgentT, _ReceivesT, None]]
):
    """autogen-core's `@event`, with a handler whose type hints are missing or do not resolve refused
    as a [`HandlerDefinitionError`][aun_runtime.HandlerDefinitionError] that names the class and method and says how to annotate it
    (autogen-core's own decorator raises a bare `AssertionError` or `NameError` there)."""

    def decorator(function: _HandlerFunction[_AgentT, _ReceivesT]) -> MessageHandler[_AgentT, _ReceivesT, None]:
        _check_annotations(function)
        try:
            return _autogen_event(function, match=match, strict=strict)  # type: ignore[call-overload, no-any-return]
        except AssertionError as exc:
            raise HandlerDefinitionError(f"{_where(function)}: {exc}. {_how_to_annotate(function)}") from None

    return decorator if func is None else decorator(func)


def _where(function: Any) -> str:
    # "Class.method", without the "<locals>" of a class defined inside a function.
    return str(getattr(function, "__qualname__", repr(function))).rpartition("<locals>.")[2]


def _how_to_annotate(function: Any) -> str:
    name = getattr(function, "__name__", "handler")
    return (
        f"Annotate it as `async def {name}(self, message: AUNMessage, ctx: MessageContext) -> None` "
        "(or `message: SomeContract` to receive one contract's json payloads decoded)"
    )


def _check_annotations(function: Any) -> None:
    try:
        hints = get_type_hints(function)
    except Exception as exc:  # NameError, or anything else an annotation's evaluation raises
        raise HandlerDefinitionError(
            f"{_where(function)}: the type hints of this @event handler do not resolve ({exc}): import or "
            "define every name they use before the class (a contract class defined further down the "
            f"module does not exist yet when the handler is decorated). {_how_to_annotate(function)}"
        ) from None
    missing = [part for part in ("message", "return") if part not in hints]
    if missing:
        what = " and ".join("the return type" if part == "return" else "`message`" for part in missing)
        raise HandlerDefinitionError(
            f"{_where(function)}: an @event handler needs type hints on `message` (autogen-core routes "
            f"by its type) and on its return (`-> None`); {what} has none. {_how_to_annotate(function)}"
        )


class AUNAgent(RoutedAgent):
    """Base class of AUN agents. Subclass it, add `@event` handlers, register it with a runtime.

    Args:
        description: one line saying what the agent does (shown in metadata and consoles).
    """

    #: Every AUN agent is autonomous: it decides whether, when and how often to answer. Even one that
    #: always answers is autonomous as far as the protocol is concerned.
    mode: ClassVar[str] = "autonomous"
    _aun_handler_table: ClassVar[Any]
    _aun_routes: ClassVar[dict[type, tuple[tuple[Any, Any, Any], ...]]]
    _aun_discovered_handlers: ClassVar[tuple[Any, ...]]
    #: The agent's agent.md card (YAML front matter + Markdown), checked when the agent is registered.
    agent_md: ClassVar[str | None] = None
    #: Keep every instance in memory for the runtime's whole life. By default an instance that has
    #: been idle for the runtime's ``idle_timeout`` may be evicted: :meth:`save_state` is called, the
    #: instance is dropped, and a new one gets :meth:`load_state` before its next message. A class
    #: that keeps state it does not save (or that code outside holds on to) sets this to True.
    stay_resident: ClassVar[bool] = False
    #: How a turn that failed for a passing cause ([`TransientError`][aun_runtime.TransientError]) is
    #: tried again (see [`TurnRetry`][aun_runtime.TurnRetry]); None: its message is a (retryable) dead
    #: letter at once. With a policy, each send of a handler turn gets an id derived from the message
    #: answered and its place in the turn, so that a second try sends nothing twice.
    turn_retry: TurnRetry | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for reserved in ("on_message", "on_message_impl"):
            if reserved in cls.__dict__ and hasattr(cls.__dict__[reserved], "is_message_handler"):
                raise HandlerDefinitionError(
                    f"{cls.__name__}.{reserved}: {reserved} is autogen-core's entry point for every "
                    "message; an @event handler of that name would bypass the mailbox and the channel. "
                    "Give the handler another name (for example on_text)"
                )
        for name, value in cls.__dict__.items():
            if hasattr(value, "is_message_handler"):
                continue
            for base in cls.__mro__[1:]:
                if name in base.__dict__:
                    if _is_event_handler(base.__dict__[name]):
                        raise HandlerDefinitionError(
                            f"{cls.__name__}.{name} overrides the @event handler {base.__name__}.{name} "
                            "without being one, which would silently stop it from receiving messages: "
                            f"decorate the override with @event too (it may call super().{name}), or "
                            "give it another name"
                        )
                    break
        for name in dir(cls):
            handler = getattr(cls, name, None)
            if hasattr(handler, "is_message_handler") and not _is_event_handler(handler):
                raise HandlerDefinitionError(
                    f"{cls.__name__}.{name}: only @event handlers are allowed on an AUN agent; a receiver "
                    "has no obligation to respond, so use @event and answer through self.send/self.reply"
                )

    def __init__(self, description: str = "") -> None:
        super().__init__(description)
        # RoutedAgent builds a handler table per instance; a class's handlers never change, so its
        # instances share one (a runtime may create and evict many thousands of them).
        cls = type(self)
        shared = cls.__dict__.get("_aun_handler_table")
        if shared is None:
            shared = self._handlers
            cls._aun_handler_table = shared
            # What _dispatch needs per type: each handler's router, and the function behind
            # autogen-core's @event wrapper (None if there is none to call directly).
            cls._aun_routes = {
                target: tuple((h.router, getattr(h, "__wrapped__", None), h) for h in handlers)
                for target, handlers in shared.items()
            }
        self._handlers = shared
        self._aun: AgentHost | None = None
        self._endpoint: Endpoint | None = None
        self._scheduled: set[asyncio.Task[None]] | None = None

    @classmethod
    def _discover_handlers(cls) -> Sequence[Any]:
        # autogen-core looks through dir(cls) for every instance it creates: do it once per class.
        found = cls.__dict__.get("_aun_discovered_handlers")
        if found is None:
            found = tuple(super()._discover_handlers())
            cls._aun_discovered_handlers = found
        return found

    def _attach(self, host: AgentHost, endpoint: Endpoint) -> None:
        self._aun = host
        self._endpoint = endpoint

    # -- identity ----------------------------------------------------------------------------------

    @property
    def aid(self) -> str:
        """This agent's AID (its autogen-core agent type)."""
        return self.id.type

    @property
    def aun(self) -> AgentHost:
        """The AUN runtime this agent lives in, as far as an agent may use it."""
        if self._aun is None:
            raise RuntimeError(f"{type(self).__name__} is not registered with an AUNRuntime")
        return self._aun

    @property
    def aun_metadata(self) -> dict[str, str]:
        """AUN metadata: AID, behaviour mode (always `autonomous`) and description."""
        return {"aid": self.aid, "mode": self.mode, "description": self._description}

    @property
    def evictable(self) -> bool:
        """May the runtime evict this instance when idle? Not if its class stays resident, and not
        while it has scheduled actions (they would go on running on a dropped instance)."""
        return not self.stay_resident and not self._scheduled

    @property
    def inbound(self) -> AUNMessage | None:
        """The message being handled right now, or None outside a handler."""
        return INBOUND.get()

    # -- delivery ----------------------------------------------------------------------------------

    def on_message_impl(self, message: Any, ctx: MessageContext) -> Coroutine[Any, Any, Any]:
        """Deliver through mailbox and channel. Not to be overridden: write `@event` handlers.

        It returns the delivery's coroutine rather than awaiting it in one of its own: a frame
        less on every delivery.
        """
        endpoint = self._endpoint
        if endpoint is None:  # constructed outside an AUN runtime: plain autogen-core routing
            return super().on_message_impl(message, ctx)
        return endpoint.runtime.mailbox_rule.deliver(endpoint, self._dispatch, message, ctx)

    async def _dispatch(self, message: Any, ctx: MessageContext, tried: int = 1) -> None:
        """Run the matching handler for one admitted message, as one turn under the agent's
        handler timeout (see `aun_runtime.delivery._turns`); failures become dead letters, and a transient
        one is tried again first, holding the mailbox (see `aun_runtime.delivery._turn_retry`)."""
        envelope = message if isinstance(message, AUNMessage) else None
        endpoint = self._endpoint
        assert endpoint is not None  # only an attached agent's endpoint dispatches
        turns = endpoint.runtime.turns
        turn = turns.begin(self.aid, envelope, endpoint.handler_timeout)
        token = INBOUND.set(envelope)
        acting = ACTING.set(self)
        again = False
        try:
            if tried > 1:
                turn.attempt = tried
                await self._wait_to_try(turn, tried - 1)
            target = message
            if isinstance(message, AUNMessage) and type(message.payload) is JsonPayload:
                contract = decode_contract(message.payload)
                if contract is not None and type(contract) in self._handlers:
                    target = contract
            # RoutedAgent.on_message_impl, inlined: this runs for every delivery. The handler table
            # is keyed by exact type, which is the check autogen-core's @event wrapper makes, so the
            # wrapped function is called directly (and held to the same rule: it returns None).
            for router, function, handler in self._aun_routes.get(type(target), ()):
                if router(target, ctx):
                    if function is None:
                        await handler(self, target, ctx)
                    elif await function(self, target, ctx) is not None:
                        raise ValueError(f"{function.__name__} returned a value; an @event handler returns None")
                    break
            else:
                await self.on_unhandled_message(target, ctx)
        except (HopLimitExceeded, BudgetExceeded):
            pass  # recorded as a loop or budget stop by the send or model call that was refused
        except asyncio.CancelledError:
            cause = turns.cut_off(turn)
            if cause is None:
                raise  # cancelled by the core (the runtime stopping), not by the watch
            self.aun.record_dead_letter(self.aid, envelope, cause)
        except TransientError as exc:
            policy = self.turn_retry
            again = policy is not None and tried < policy.tries and not turns.closing
            if again:
                self.aun.stats.turn_retries += 1
                self.think(f"try {tried} of this turn failed ({type(exc).__name__}: {exc}); trying again")
            else:
                self.aun.record_dead_letter(self.aid, envelope, exc)
        except Exception as exc:
            self.aun.record_dead_letter(self.aid, envelope, turns.cut_off(turn) or exc)
        finally:
            turns.end(turn)
            ACTING.reset(acting)
            INBOUND.reset(token)
        if again:
            await self._dispatch(message, ctx, tried + 1)

    async def _wait_to_try(self, turn: Turn, tried: int) -> None:
        """Before the next try of a turn: its policy's wait, shown as the turn waiting for `retry`."""
        assert self.turn_retry is not None
        turn.wait_for("retry")
        await asyncio.sleep(self.turn_retry.delay(tried))
        turn.wait_for(None)

    def _send_id(self, message_id: str | None) -> str | None:
        """The id of a send: the caller's; else, in a handler turn of an agent with a retry policy,
        one derived from the message answered and the send's place in the turn."""
        if message_id is not None or self.turn_retry is None:
            return message_id
        inbound = INBOUND.get()
        turn = self.aun.turns.current() if inbound is not None else None
        if inbound is None or turn is None or turn.message is not inbound:
            return None  # a proactive turn: nothing to derive from
        turn.sends += 1
        return derived_message_id(self.aid, inbound, turn.sends - 1)

    async def on_unhandled_message(self, message: Any, ctx: MessageContext) -> None:
        """A message no handler takes. It is archived already; silence is a legal answer."""
        logger.debug("%s has no handler for %s; archived, no action", self.id.type, type(message).__name__)

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> NoReturn:
        """Refused: AUN has no request/response. Use [`send`][aun_runtime.Inbox.send]."""
        raise RPCForbiddenError()

    # -- the send tools ----------------------------------------------------------------------------

    async def send(
        self,
        to: str,
        payload: PayloadLike,
        *,
        in_reply_to: AUNMessage | str | None = None,
        message_id: str | None = None,
    ) -> AUNMessage:
        """Send a direct message to `to`. Returns once it is queued; no answer is awaited.

        Args:
            to: the recipient's AID (local, or remote through a gateway).
            payload: a payload model, a contract instance, a dict, or a string (becomes `text`).
            in_reply_to: the message (or its id) this one answers, if any.
            message_id: a caller-chosen id (for idempotent retries); default: a fresh one.
        """
        return await self.aun.send_as(
            self.aid, payload, to=to, in_reply_to=in_reply_to, message_id=self._send_id(message_id)
        )

    async def group_send(
        self,
        group_id: str,
        payload: PayloadLike,
        *,
        mentions: Sequence[str | Mention] | None = None,
        in_reply_to: AUNMessage | str | None = None,
        message_id: str | None = None,
    ) -> AUNMessage:
        """Post to a group this agent belongs to.

        Args:
            group_id: the group.
            payload: as for [`send`][aun_runtime.Inbox.send].
            mentions: AIDs (or `"all"`) to mention; they decide who sees it in a `mention` group.
            in_reply_to: the message answered, if any.
            message_id: a caller-chosen id; default: a fresh one.
        """
        return await self.aun.send_as(
            self.aid,
            payload,
            group_id=group_id,
            mentions=mentions,
            in_reply_to=in_reply_to,
            message_id=self._send_id(message_id),
        )

    async def reply(
        self, payload: PayloadLike, *, mentions: Sequence[str | Mention] | None = None
    ) -> AUNMessage:
        """Answer the message being handled: to its group if it came through one, else to its sender.

        In a `mention` group a message that names nobody is filtered for every member, so a text
        reply there mentions the sender of the message answered unless `mentions` is given: pass
        `mentions=[...]` to name others instead, or `mentions=[]` to mention nobody. A json or
        other non-text reply carries no mentions, so it gets none by default either.

        Args:
            payload: as for [`send`][aun_runtime.Inbox.send].
            mentions: who to mention in a group (ignored for a direct reply); None means the default
                above, `[]` means no mentions.
        """
        inbound = self.inbound
        if inbound is None:
            raise RuntimeError("reply() needs a message being handled; use send() to start a conversation")
        if inbound.group_id is not None:
            if (
                mentions is None
                and replies_name_the_sender(inbound.dispatch_mode)
                and inbound.from_aid != self.aid
                and (isinstance(payload, str) or (type(payload) is TextPayload and not payload.mentions))
            ):
                mentions = [inbound.from_aid]
            return await self.group_send(inbound.group_id, payload, mentions=mentions, in_reply_to=inbound)
        return await self.send(inbound.from_aid, payload, in_reply_to=inbound)

    @contextlib.contextmanager
    def acting_on(self, message: AUNMessage) -> Iterator[None]:
        """Act on `message` again, later, as if handling it: for a follow-up in a proactive action.

        Inside the block, [`inbound`][aun_runtime.Inbox.inbound] is `message`: [`reply`][aun_runtime.Inbox.reply] answers it, sends continue its
        thread (one hop further, counted in its budgets) and model calls spend this agent's budget for
        that thread. An agent that promised to come back to something keeps the conversation in one
        thread this way, instead of starting one nobody can bound.

        Example:
            ```python
            asked = self.inbound
            async def later() -> None:
                with self.acting_on(asked):
                    await self.reply("done, as promised")
            self.schedule(later, delay=60)
            ```
        """
        token = INBOUND.set(message)
        try:
            yield
        finally:
            INBOUND.reset(token)

    def think(self, text: str) -> None:
        """Record internal reasoning. It goes to the archive and nowhere else."""
        inbound = self.inbound
        self.aun.archive.record_thought(self.aid, text, about=inbound.message_id if inbound else None)

    def schedule(
        self, action: Callable[[], Awaitable[None]], *, delay: float = 0.0, every: float | None = None
    ) -> asyncio.Task[None]:
        """Run `action` later, with no inbound message: the way an agent speaks first.

        Args:
            action: a coroutine function taking no arguments.
            delay: seconds to wait before the first run.
            every: if set, run again every `every` seconds until the runtime stops.

        Returns:
            The task; cancel it to stop a repeating action. The runtime cancels it on stop.
        """
        task = asyncio.get_running_loop().create_task(
            repeating(lambda: run_proactive(self, action), delay=delay, every=every)(), name=f"aun:{self.aid}"
        )
        self.aun.keep_task(task)
        if self._scheduled is None:
            self._scheduled = set()
        self._scheduled.add(task)
        task.add_done_callback(self._scheduled.discard)
        return task

    async def on_start(self) -> None:
        """Called once the runtime has started this agent. Override to speak first.

        An agent class that overrides it is created when the runtime starts, instead of on its first
        message, so that it can act with nobody having written to it. The runtime awaits it (in
        registration order, so runs are reproducible): keep it short, and [`schedule`][aun_runtime.Inbox.schedule] anything
        that goes on.
        """

    def history(
        self,
        *,
        group_id: str | None = None,
        peer: str | None = None,
        kinds: Sequence[RecordKind | str] | None = None,
        after_id: int = 0,
        limit: int = 50,
    ) -> list[ArchiveRecord]:
        """This agent's archive, oldest first, including the messages its channel filtered."""
        return self.aun.archive.history(
            self.aid, group_id=group_id, peer=peer, kinds=kinds, after_id=after_id, limit=limit
        )

    async def close(self) -> None:
        """Called when the runtime drops this instance (eviction or close). Override to release
        resources, and call `super().close()`."""
        if self._endpoint is not None:
            self._endpoint.park_channel()  # keep the dedup window small while nobody is home

    async def save_state(self) -> Mapping[str, Any]:
        """An agent's own state, for `save_state`. Default: stateless."""
        return {}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what [`save_state`][aun_runtime.Inbox.save_state] returned. Default: nothing to restore."""


#: What :meth:`AUNRuntime.register_agent` accepts besides a class: a callable that returns an agent.
AgentFactory: TypeAlias = Callable[[], AUNAgent | Awaitable[AUNAgent]]


class AgentMaker:
    """The factory the core calls for the AIDs registered with one user factory: runs it and
    attaches the agent to the endpoint of the AID being created.

    One serves every AID of an agent class (a million AIDs of one class share it): the AID comes
    from autogen-core's instantiation context, which every core sets while it calls a factory.
    """

    __slots__ = ("endpoints", "factory", "host")

    def __init__(
        self, factory: type[AUNAgent] | AgentFactory, host: AgentHost, endpoints: Mapping[str, Endpoint]
    ) -> None:
        self.factory = factory
        self.host = host
        self.endpoints = endpoints

    async def __call__(self) -> AUNAgent:
        endpoint = self.endpoints[AgentInstantiationContext.current_agent_id().type]
        created = self.factory()
        agent = await created if asyncio.iscoroutine(created) else created
        if not isinstance(agent, AUNAgent):
            raise AgentRegistrationError(f"the factory for {endpoint.aid} returned {type(agent).__name__}, not an AUNAgent")
        agent._attach(self.host, endpoint)
        if not endpoint.description:  # a factory such as a lambda said nothing: the agent says it
            endpoint.description = agent.metadata["description"] or class_description(type(agent))
            if endpoint.description:
                self.host.archive.describe_agent(endpoint.aid, endpoint.description)
        return agent


def class_description(cls: type) -> str:
    """The first line of a class's docstring (empty if it has none): an agent's description by default.

    Interned: many AIDs of one class share the one string (100,000 copies are 14 MB).
    """
    doc = cls.__doc__
    return sys.intern(doc.strip().splitlines()[0]) if doc and doc.strip() else ""
