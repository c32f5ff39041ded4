"""`AUNRuntime`: registration of AIDs and groups, over a core; sends go through the send path.

The runtime is a facade over an autogen-core `AgentRuntime` (the *core*, by default
[`AUNActorRuntime`][aun_runtime.AUNActorRuntime]). Every AUN message is a publish on a topic of the core;
nothing is ever sent as an RPC. On top of the core the runtime adds what AUN needs:

* **Mailboxes.** Each AID has one [`Mailbox`][aun_runtime.Mailbox]: its bound and overflow policy. A
  core that drains mailboxes itself (`drains_mailboxes`) is handed each AID's mailbox and
  enforces it; on any other core the runtime applies it when the message is delivered (one rule
  object says which, see `aun_runtime.delivery._mailbox_rule`). Either way direct sends reserve their
  place first, so the rules are the same on every core.
* **Placement.** One object (`aun_runtime.delivery._placement.Placement`) answers where an AID lives (here,
  elsewhere in a cluster, on the network, nowhere) and who a group's members are; groups live in
  the core's directory (a distributed worker's) or in this runtime.
* **Routing.** A direct message to `x.local` is published on `aun.inbox.x.local`; a group post is
  a copy for each member on its inbox topic, given out in one place (`aun_runtime.delivery._fan_out`), so
  membership can change while the runtime runs.
* **Sending** (`aun_runtime.delivery._send`): threads and hops, the loop guard, the thread budgets and
  routing, for the agents' send tools and for code outside any agent alike.
* **Dead letters** (`aun_runtime.delivery._failures`). A message that cannot be delivered (unknown AID,
  no route, unknown group, a sender outside the group, a full mailbox) or whose handler raises is
  archived as a dead letter with the reason and logged. The sender of an undeliverable message also
  gets a specific error.
* **The loop guard.** Every message sent while a handler runs belongs to the handled message's
  thread and counts one hop more. A send that would pass `max_hops` is refused, recorded as a
  loop stop and logged, which ends A->B->A and A->B->C->A storms.
* **Liveness** is asked for explicitly with [`AUNRuntime.ping`][aun_runtime.AUNRuntime.ping]; silence is never failure.

The facade answers the application and delegates: the local AIDs, their registration and what the
core asks of them to `aun_runtime.api._agent_table`; start, stop and close to
`aun_runtime.api._runtime_lifecycle`; redrives to `aun_runtime.api._redrive`; every send to the send path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from protocols.aun import (
    AUNMessage,
    DispatchMode,
    Mention,
    parse_dispatch_mode,
    validate_aid,
    validate_group_id,
)

from ..base._agent_md import AgentCard
from ..base._budgets import DEFAULT_BUDGETS, BudgetLedger, Budgets
from ..base._errors import RPCForbiddenError, UnknownGroupError
from ..base._groups import GroupInfo
from ..base._payload import PayloadLike
from ..base._stats import RuntimeStats
from ..core._actor_runtime import AUNActorRuntime
from ..delivery._channel import DEFAULT_DEDUP_WINDOW
from ..delivery._core_protocol import AUNCore
from ..delivery._endpoint import Endpoint
from ..delivery._failures import FailureLog
from ..delivery._mailbox import (
    DEFAULT_BLOCK_TIMEOUT,
    DEFAULT_MAILBOX_CAPACITY,
    Mailbox,
    MailboxOptions,
    OverflowPolicy,
)
from ..delivery._mailbox_rule import MailboxRule, mailbox_rule
from ..delivery._placement import IN_CLUSTER, Placement
from ..delivery._route import OutboundRoute, deliver_remote
from ..delivery._send import SendPath
from ..delivery._turns import DEFAULT_HANDLER_TIMEOUT, RUNTIME_DEFAULT, RuntimeDefault, TurnWatch
from ..storage._archive import Archive, ArchiveRecord
from ..transcripts._transcript import ArchiveRoles, render_transcript
from ._agent import AgentFactory, AUNAgent
from ._agent_table import AgentTable, check_handler_timeout
from ._busy import AgentBusy, busy_agents
from ._inbox import Inbox
from ._on_stop import DEFAULT_ON_STOP_TIMEOUT, StopCallback
from ._redrive import DeadLetterFilter, redrive
from ._runtime_lifecycle import LEFTOVER_WAIT, RuntimeLifecycle

__all__ = ["DEFAULT_MAX_HOPS", "LEFTOVER_WAIT", "AUNRuntime", "GroupInfo", "PayloadLike", "RuntimeStats"]

#: Hops a thread may take before the loop guard stops it. Real collaborations (a reflection loop of
#: a few rounds, a debate of a few rounds among a few agents) stay well under it; storms pass it fast.
DEFAULT_MAX_HOPS = 32
#: The AID that :meth:`AUNRuntime.send` uses for code outside any agent, unless told otherwise.
APP_NAME = "app"

AgentT = TypeVar("AgentT", bound=AUNAgent)


class AUNRuntime:
    """An AUN runtime: agents addressed by AID, groups, publish-only delivery and a full archive.

    Args:
        archive: an [`Archive`][aun_runtime.Archive], or a path for its SQLite file (default: in memory).
        domain: the local domain: AIDs `<name>.<domain>` are local, any other goes out through a
            gateway route (or is a dead letter if there is none).
        max_hops: the loop guard's hop limit per thread.
        mailbox_capacity: each agent's mailbox bound (default: the core's, if it was given mailbox
            options, else `DEFAULT_MAILBOX_CAPACITY`). Mailbox options are
            given here or to the core, not both.
        overflow: what happens when a mailbox is full (default: `block`).
        block_timeout: how long a sender waits for room under `block`.
        dedup_window: how many recent message keys each agent remembers.
        budgets: the limits on threads and model use every agent works within, unless registered
            with its own (see [`Budgets`][aun_runtime.Budgets]).
        handler_timeout: seconds one turn (a handler on one message, one run of a proactive
            action) may run before it is cancelled and its message becomes a dead letter
            (`HandlerTimeoutError`), unless an agent is registered with its own;
            None: no limit. See `DEFAULT_HANDLER_TIMEOUT` for why five minutes.
        core: the autogen-core runtime that carries the messages, an [`AUNCore`][aun_runtime.AUNCore]
            (default: a fresh [`AUNActorRuntime`][aun_runtime.AUNActorRuntime]). A core that keeps its own archive (a
            distributed worker journals into it) supplies it when `archive` is not given; a core
            with a `directory` tells the runtime about AIDs and groups held by other processes, and
            then holds the groups.

    Raises:
        TypeError: `core` is a plain autogen-core runtime, not an [`AUNCore`][aun_runtime.AUNCore].
        ValueError: an option is out of range, or given both here and to the core.

    Example:
        ```python
        async with AUNRuntime() as runtime:
            await runtime.register_agent("echo.local", Echo)
            inbox = await runtime.open_inbox("app.local")
            await inbox.send("echo.local", "hello")
            print(await inbox.next(timeout=5))
        ```
    """

    def __init__(
        self,
        *,
        archive: Archive | str | Path | None = None,
        domain: str = "local",
        max_hops: int = DEFAULT_MAX_HOPS,
        mailbox_capacity: int | None = None,
        overflow: OverflowPolicy | str | None = None,
        block_timeout: float | None = None,
        dedup_window: int = DEFAULT_DEDUP_WINDOW,
        budgets: Budgets = DEFAULT_BUDGETS,
        handler_timeout: float | None = DEFAULT_HANDLER_TIMEOUT,
        core: AUNCore | None = None,
    ) -> None:
        if max_hops < 1:
            raise ValueError("max_hops must be at least 1")
        check_handler_timeout(handler_timeout)
        if core is not None and not isinstance(core, AUNCore):
            raise TypeError(
                f"{type(core).__name__} is not an AUNCore: an AUNRuntime runs on AUNActorRuntime (the "
                "default), AUNSingleThreadedRuntime (autogen-core's runtime with AUN rules) or a "
                "distributed WorkerRuntime"
            )
        self.core: AUNCore = core if core is not None else AUNActorRuntime()
        core_archive = self.core.archive
        if core_archive is not None:
            if archive is not None and archive is not core_archive:
                raise ValueError("this core keeps its own archive: pass the archive to the core, not here")
            archive = core_archive
        self.archive = archive if isinstance(archive, Archive) else Archive(archive or ":memory:")
        self.domain = domain
        self._app = f"{APP_NAME}.{domain}"  # the AID of code outside any agent
        self.max_hops = max_hops
        #: How every agent's mailbox is made (given here, or to the core).
        self.mailbox_options = _mailbox_options(self.core, mailbox_capacity, overflow, block_timeout)
        self.dedup_window = dedup_window
        self.stats = RuntimeStats()
        #: The counts behind the budgets: threads' breadth and each agent's model use.
        self.ledger = BudgetLedger(budgets)
        # A core that drains mailboxes itself takes each AID's Mailbox from the agent table (which
        # the core is attached to), so the bound and the policy are enforced once, in the core; the
        # facade then only reserves places for direct sends.
        #: Who admits messages to mailboxes and takes turns (an attribute: every delivery reads it).
        self.mailbox_rule: MailboxRule = mailbox_rule(self.core.drains_mailboxes)
        #: The default of every agent's handler timeout (see register_agent).
        self.handler_timeout = handler_timeout
        #: Every turn in flight, under its agent's handler timeout (the failure log it reports each
        #: turn's end to is made next: it needs the watch).
        self.turns = TurnWatch(on_end=lambda turn: failures.summarise(turn))
        #: The archive's last record id when this runtime took it: what came before is earlier runs'.
        self.archive_start = self.archive.last_id()
        failures = FailureLog(self.archive, self.stats, self.turns)
        endpoints: dict[str, Endpoint] = {}
        #: Where AIDs live and who groups' members are (the core's directory, or groups kept here).
        self.placement = Placement(endpoints, self.core.directory, domain)
        self._agents = AgentTable(
            self, endpoints, core=self.core, placement=self.placement, ledger=self.ledger, failures=failures,
            mailbox_rule=self.mailbox_rule, handler_timeout=handler_timeout,
        )
        self._lifecycle = RuntimeLifecycle(self.core, self.turns, self.archive)
        self._sending = SendPath(
            archive=self.archive, core=self.core, ledger=self.ledger, failures=failures, endpoints=endpoints,
            placement=self.placement, max_hops=max_hops, mailbox_rule=self.mailbox_rule,
        )
        self._failures = failures
        # What agents and their endpoints use of the runtime ([`AgentHost`][aun_runtime.AgentHost], where
        # each is described) is answered by the part that holds it: bound here, not wrapped, so that
        # an agent's send or record costs no extra call. (A string after each: its reference entry.)
        self.send_as = self._sending.send
        """Send as the local AID `sender`: what an agent's send tools call."""
        self.was_member = self.placement.was_member
        """Whether `aid` was in `group_id` when its message `seq` was posted."""
        self.handler_timeout_of = self._agents.handler_timeout_of
        """Seconds a turn of the local agent `aid` may run (None: no limit)."""
        self.is_local = self._agents.is_local
        """True if `aid` is registered in this runtime."""
        self.is_agent = self._agents.is_agent
        """True if `aid` is a local agent (not an application's [`Inbox`][aun_runtime.Inbox])."""
        self.keep_task = self._lifecycle.keep_task
        """Cancel `task` (an agent's scheduled action) when the runtime stops."""
        self.record_dead_letter = failures.dead_letter
        """Record a dead letter: archived with the reason, counted in `stats`, logged: never silent."""
        self.record_budget_stop = failures.budget_stop
        """Record that a budget stopped `owner`: archived as `budget_stop`, counted, logged."""
        self.record_model_anomaly = failures.model_anomaly
        """Record that the model of `owner` answered something that is not an answer (`model_anomaly`)."""

    # -- lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> AUNRuntime:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.stop_when_idle()
        else:
            await self.stop()

    async def start(self) -> None:
        """Start delivering; agents that speak first (`on_start`) are created and started now."""
        if await self._lifecycle.start():
            await self._agents.start_eager()

    def busy(self) -> list[AgentBusy]:
        """Each agent with a turn in flight or messages waiting: since when, waiting for what (model
        limiter, model, tool, retry), which try, its mailbox's depth and oldest message's age."""
        return busy_agents(self.turns.in_flight, self._agents.endpoints)

    async def redrive(
        self,
        *,
        aid: str | None = None,
        cause: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        record_id: int | None = None,
    ) -> list[ArchiveRecord]:
        """Deliver again the open dead letters marked retryable of this runtime's agents (filtered by
        the agent's AID, text in the cause, when they were recorded, or one archive record id), each recorded as
        `redriven` first. A redriven turn that fails again is a new dead letter. Returns the dead
        letters redriven, oldest first."""
        which = DeadLetterFilter(aid, cause, since, until, record_id=record_id)
        return await redrive(self.archive, which, self._agents.agent_endpoint, self._sending.redeliver)

    async def settle(self) -> None:
        """Wait until every message sent so far, and everything it caused, has been handled.

        Scheduled (proactive) actions are not waited for: they may run forever by design.
        """
        await self._lifecycle.settle()

    async def stop_when_idle(self) -> None:
        """Wait until everything sent has been handled, then stop (and run the `on_stop`
        callbacks)."""
        await self._lifecycle.stop_when_idle()

    async def stop(self, *, grace: float = 0.0) -> None:
        """Stop: no new turn starts, the turns in flight get `grace` seconds to end, and then
        whatever still runs is cancelled; then the `on_stop` callbacks run.

        A message whose turn would come meanwhile is not handled, and neither is anything still
        queued: each is a dead letter ([`RuntimeStoppedError`][aun_runtime.RuntimeStoppedError]), except on a
        distributed worker, which leaves it unacknowledged so that its sender sends it again to the
        worker's next run. A turn cancelled at the end of the grace is recorded the same way.

        Args:
            grace: seconds the turns in flight may take to end (default 0: cancel them at once).
                The commands give them `STOP_GRACE` after a signal.
        """
        await self._lifecycle.stop(grace)

    def on_stop(self, callback: StopCallback, *, timeout: float = DEFAULT_ON_STOP_TIMEOUT) -> StopCallback:
        """Run `callback` once when this runtime stops, after its last turn: how an application
        ties what its agents use (a `McpWorkbench`, an HTTP client) to the run.

        Callbacks run last registered first, each within `timeout` seconds (one still running then
        is cancelled); one that raises is logged with its traceback, and the stop goes on.

        Args:
            callback: a coroutine function, or a plain function, taking no arguments.
            timeout: seconds it may take.

        Returns:
            `callback`, so that this works as a decorator too.

        Example:
            ```python
            async def app(runtime: AUNRuntime) -> None:
                workbench = McpWorkbench(StdioServerParams(command="my-mcp-server"))
                await workbench.start()
                runtime.on_stop(workbench.stop)
                await runtime.register_agent("scout.local", lambda: AutonomousAgent(model, tools=workbench))
            ```
        """
        self._lifecycle.on_stop(callback, timeout)
        return callback

    async def close(self) -> None:
        """Stop, close the agents (on the actor core: saving their state into a durable state
        store, if it has one), close the core, and close the archive."""
        await self.stop()
        await self._lifecycle.close()

    # -- registration ------------------------------------------------------------------------------

    async def register_agent(
        self,
        aid: str,
        factory: type[AUNAgent] | AgentFactory,
        *,
        description: str = "",
        eager: bool | None = None,
        card: AgentCard | str | None = None,
        budgets: Budgets | None = None,
        handler_timeout: float | RuntimeDefault | None = RUNTIME_DEFAULT,
    ) -> None:
        """Make `aid` a local agent, created by `factory` on its first message.

        Args:
            aid: the agent's AID.
            factory: an [`AUNAgent`][aun_runtime.AUNAgent] subclass, or a callable returning an instance.
            description: one line for metadata and the console (default: the card's, else the class
                docstring's first line; for a factory that is not a class, such as a lambda, the
                description the agent it makes gives itself, else its class docstring's first line,
                taken when the agent is first made).
            eager: create the agent when the runtime starts rather than on its first message. Default:
                true for a class that overrides [`AUNAgent.on_start`][aun_runtime.AUNAgent.on_start] (it means to speak first).
            card: the agent's agent.md (text or parsed); default: the class's `agent_md`, if any.
            budgets: limits of its own on threads and model use (default: the runtime's).
            handler_timeout: seconds one of its turns may run (default: the runtime's
                `handler_timeout`); None: no limit.

        Raises:
            InvalidAIDError: `aid` is not a valid AID.
            AgentRegistrationError: `aid` is already registered, or the card is for another AID.
            AgentMDError: the card is not a valid agent.md.
        """
        endpoint = await self._agents.register(
            aid, factory, description=description, eager=eager, card=card, budgets=budgets,
            handler_timeout=handler_timeout,
        )
        if self._lifecycle.running and endpoint.eager:
            await self._agents.start(endpoint)

    async def open_inbox(self, aid: str | None = None) -> Inbox:
        """Register an [`Inbox`][aun_runtime.Inbox] for code outside any agent, and return it.

        An inbox is an agent that keeps what it receives, so that an application (or a test) can send
        as `aid` and read whatever comes back: nothing, one message or many. Opening an inbox
        that is already open returns it.
        """
        aid = aid or self._app
        agents = self._agents
        if agents.is_inbox(aid):  # already open (e.g. by a send without a sender): the same inbox
            return await agents.instance(aid, Inbox)
        await self.register_agent(aid, Inbox, description="application inbox", eager=True)
        agents.mark_inbox(aid)
        if not self._lifecycle.running:
            await agents.instance(aid, AUNAgent)
        return await agents.instance(aid, Inbox)

    async def agent_instance(self, aid: str, cls: type[AgentT]) -> AgentT:
        """The local instance of `aid` (created if it was not yet), checked to be a `cls`.

        For inspection and tests; agents talk to each other with messages, never through instances.
        """
        return await self._agents.instance(aid, cls)

    def transcript(self, limit: int = 10_000) -> str:
        """The archive as readable text: replies under what they answer, silence as delivered."""
        return render_transcript(self.archive.records(limit=limit), is_agent=ArchiveRoles(self.archive))

    def agent_info(self, aid: str) -> dict[str, str]:
        """AUN metadata of a local agent: AID, behaviour mode (`autonomous`) and description."""
        return {"aid": aid, "mode": AUNAgent.mode, "description": self._agents.endpoint(aid).description}

    def agent_card(self, aid: str) -> AgentCard | None:
        """The agent.md card of a local agent, if it has one."""
        return self._agents.endpoint(aid).card

    def aids(self) -> list[str]:
        """The AIDs registered in this runtime, in registration order."""
        return list(self._agents.endpoints)

    def groups(self) -> list[GroupInfo]:
        """Every group of this runtime as it stands now."""
        return self.placement.groups()

    def mailbox(self, aid: str) -> Mailbox:
        """The mailbox of a local agent (for inspection: occupancy, high water, overflow count).

        An AID whose agent was evicted with nothing pending keeps only these counts: its mailbox
        is made again from them when asked for, so ask again rather than keep the object.
        """
        return self._agents.endpoint(aid).mailbox

    async def ping(self, aid: str) -> bool:
        """Ask explicitly whether `aid` is reachable. Never inferred from silence.

        True for a registered local agent, False for an unknown AID of the local domain. With an
        outbound route, any other AID is asked of the route (a gateway agent pings the network).

        Raises:
            NoRouteError: `aid` is outside the local domain and no gateway carries it.
        """
        validate_aid(aid)
        return await self.placement.ping(aid)

    # -- groups ------------------------------------------------------------------------------------

    async def create_group(
        self,
        group_id: str,
        members: Iterable[str] = (),
        dispatch_mode: DispatchMode | str = DispatchMode.BROADCAST,
    ) -> GroupInfo:
        """Create a group. `dispatch_mode` also accepts `disabled` and `mention-only`.

        The application's AID `app.<domain>` among `members` is opened as an inbox if nothing is
        registered under it yet, as [`send`][aun_runtime.AUNRuntime.send] does: what is posted to the
        group reaches it and is kept there.
        """
        validate_group_id(group_id)
        members = list(members)
        for aid in members:
            await self._app_inbox(aid)  # the application's AID as a member: its inbox, opened now
        member_list = [validate_aid(aid) for aid in members]
        return await self.placement.create_group(group_id, member_list, parse_dispatch_mode(dispatch_mode))

    async def add_member(self, group_id: str, aid: str) -> None:
        """Add `aid` to a group; it sees the group's messages posted from now on."""
        await self._app_inbox(aid)
        await self.placement.add_member(group_id, validate_aid(aid))

    async def remove_member(self, group_id: str, aid: str) -> None:
        """Remove `aid` from a group; it sees nothing posted after this, and still gets what was
        posted before (those messages were sent to it)."""
        await self.placement.remove_member(group_id, aid)

    async def set_dispatch_mode(self, group_id: str, mode: DispatchMode | str) -> None:
        """Change a group's mode. Messages already sent keep the mode they were sent with."""
        await self.placement.set_dispatch_mode(group_id, parse_dispatch_mode(mode))

    def group(self, group_id: str) -> GroupInfo:
        """The group as it stands now."""
        info = self.placement.group(group_id)
        if info is None:
            raise UnknownGroupError(f"no group {group_id!r} in this runtime; create it with create_group()")
        return info

    # -- sending -----------------------------------------------------------------------------------

    async def send(
        self,
        to: str,
        payload: PayloadLike,
        *,
        sender: str | None = None,
        in_reply_to: AUNMessage | str | None = None,
        message_id: str | None = None,
    ) -> AUNMessage:
        """Send a direct message from code outside any agent (as `sender`, default `app.<domain>`).

        Without `sender` the message goes out from the application's inbox `app.<domain>`, opened
        on first use if nothing is registered under that AID, so the answers arrive and are kept
        there (`await runtime.open_inbox()` returns that inbox) instead of becoming dead letters.
        """
        if sender is None or sender == self._app:
            sender = await self._app_inbox(sender)
        return await self._sending.send(sender, payload, to=to, in_reply_to=in_reply_to, message_id=message_id)

    async def _app_inbox(self, aid: str | None) -> str:
        """`aid`, or the application's AID `app.<domain>` when None. The application's AID is opened
        as an inbox on first use (a send, a group post, a membership) if nothing is registered under
        it, so that what comes back to it is kept instead of becoming dead letters."""
        aid = self._app if aid is None else aid
        if aid == self._app and self.placement.where(aid) not in IN_CLUSTER:
            await self.open_inbox(aid)
        return aid

    async def group_send(
        self,
        group_id: str,
        payload: PayloadLike,
        *,
        sender: str | None = None,
        mentions: Sequence[str | Mention] | None = None,
        message_id: str | None = None,
    ) -> AUNMessage:
        """Post to a group from code outside any agent, as `sender` (who must be a member; default
        `app.<domain>`, opened as an inbox on first use as for [`send`][aun_runtime.AUNRuntime.send])."""
        if sender is None or sender == self._app:
            sender = await self._app_inbox(sender)
        return await self._sending.send(
            sender, payload, group_id=group_id, mentions=mentions, message_id=message_id
        )

    async def send_message(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: AUN has no request/response. Nothing is queued."""
        raise RPCForbiddenError()

    # -- the network seam (see _route.py) -----------------------------------------------------------

    def set_outbound_route(self, route: OutboundRoute | None) -> None:
        """Send what this runtime cannot deliver itself through `route` (a gateway agent); None
        restores dead letters. With a route, an AID is local exactly when it is registered here (or,
        with a directory, held by another process of this cluster)."""
        self.placement.route = route

    @property
    def outbound_route(self) -> OutboundRoute | None:
        """The route set with [`set_outbound_route`][aun_runtime.AUNRuntime.set_outbound_route], or None."""
        return self.placement.route

    async def deliver_remote(self, arrivals: Sequence[tuple[AUNMessage, str]]) -> None:
        """Deliver messages that came from the network to local recipients, `(message, recipient)`
        in arrival order; return once the archive has committed every recipient's verdict."""
        await deliver_remote(
            arrivals, endpoints=self._agents.endpoints, core=self.core, archive=self.archive, failures=self._failures
        )


def _mailbox_options(
    core: AUNCore, capacity: int | None, overflow: OverflowPolicy | str | None, block_timeout: float | None
) -> MailboxOptions:
    """The mailbox options given to the runtime, else those given to its core, else the defaults."""
    if capacity is None and overflow is None and block_timeout is None:
        return core.mailbox_options or MailboxOptions()
    if core.mailbox_options is not None:
        raise ValueError(
            "mailbox options were given both to the core and to the runtime: give them to one of them"
        )
    return MailboxOptions(
        DEFAULT_MAILBOX_CAPACITY if capacity is None else capacity,
        OverflowPolicy.BLOCK if overflow is None else OverflowPolicy(overflow),
        DEFAULT_BLOCK_TIMEOUT if block_timeout is None else block_timeout,
    )
