"""Errors raised by the runtime. All derive from `protocols.errors.AUNError`."""

from __future__ import annotations

from protocols.errors import AUNError


class RPCForbiddenError(AUNError):
    """`send_message` was called: AUN has no request/response, so nothing was queued."""

    def __init__(self) -> None:
        super().__init__(
            "send_message is forbidden on an AUN runtime: a receiver has no obligation to respond. "
            "Publish with the send tool (agent.send / agent.group_send / agent.reply / runtime.send) or, "
            "from a plain autogen-core agent, await self.publish_message(message, TopicId(...)), and handle "
            "any answers as messages of their own, whenever and however many arrive"
        )


class UndeliverableError(AUNError):
    """A message could not be delivered; it was recorded as a dead letter."""


class UnknownAIDError(UndeliverableError):
    """No agent with this AID is registered in the runtime's local domain."""


class AgentCreationError(UndeliverableError, RuntimeError):
    """A message's recipient could not be created: its type has no factory (it was subscribed but
    never registered), or only instances were registered for its type and none under this key.

    A `RuntimeError`, as autogen-core's runtime raises in the same case. A factory that raises is
    not wrapped: its own exception is what is kept and reported."""

    @classmethod
    def unregistered(cls, agent_id: object, agent_type: str) -> AgentCreationError:
        return cls(f"cannot create {agent_id}: no agent type {agent_type!r} is registered")

    @classmethod
    def instances_only(cls, agent_id: object, agent_type: str) -> AgentCreationError:
        return cls(
            f"cannot create {agent_id}: no instance is registered under this id, and agents of type "
            f"{agent_type!r} are registered instances (register the instance before publishing to it)"
        )


class MessageDroppedError(UndeliverableError):
    """An intervention handler's `on_publish` dropped the message (returned `DropMessage`) or
    raised; nobody received it, and each recipient it had has a dead letter with this reason."""


class NoRouteError(UndeliverableError):
    """The AID is outside the local domain and no gateway carries messages there."""


class UnknownGroupError(UndeliverableError):
    """No group with this id exists."""


class NotAGroupMemberError(AUNError):
    """The sender is not a member of the group it tried to post to."""


class MailboxFullError(UndeliverableError):
    """The receiver's mailbox stayed full; the message was recorded as a dead letter."""


class OutboxFullError(UndeliverableError):
    """An outbox holds its capacity of messages not yet acknowledged (a gateway agent's, waiting for
    the network; a worker's, waiting for its host); this one was refused and is a dead letter."""


class RuntimeStoppedError(UndeliverableError):
    """The runtime stopped before this message was handled (it was queued, or its handler was
    interrupted); it was recorded as a dead letter, so it can be found and sent again."""


class HandlerTimeoutError(AUNError):
    """A turn (a handler on one message, or one run of a proactive action) ran past its agent's
    `handler_timeout` and was cancelled; its message is a dead letter and the agent went on with
    its next one."""

    def __init__(self, aid: str, what: str, ran: float, timeout: float) -> None:
        super().__init__(
            f"{what} of {aid} ran {ran:.1f} s, past its handler_timeout of {timeout:g} s, and was cancelled; "
            "the agent goes on with its next message (give register_agent(..., handler_timeout=...) or "
            "AUNRuntime(handler_timeout=...) more seconds, or None for no limit, if such turns are intended)"
        )
        self.aid = aid
        #: Seconds the turn ran before it was cut off.
        self.ran = ran
        #: The handler timeout it ran past, in seconds.
        self.timeout = timeout


class HopLimitExceeded(AUNError):
    """A conversation thread went past the hop limit: the loop guard stopped it and recorded the stop."""

    def __init__(self, thread: str, hops: int, limit: int) -> None:
        super().__init__(
            f"thread {thread} reached {hops} hops, over the limit of {limit}: the loop guard stopped it "
            "(raise AUNRuntime(max_hops=...) if long chains are intended)"
        )
        self.thread = thread
        self.hops = hops
        self.limit = limit


class AgentRegistrationError(AUNError):
    """An agent or group could not be registered (duplicate AID, wrong class, runtime state)."""


class InterventionHandlerError(AUNError, TypeError):
    """An intervention handler given to a runtime has no `on_publish` of its own.

    `on_publish` is the only hook that runs on an AUN runtime: `on_send` and `on_response`
    belong to `send_message`, which is refused (a receiver has no obligation to respond), so a
    handler with only those would never run, and would look as if it did."""


class HandlerDefinitionError(AUNError, TypeError):
    """An AUN agent class declares a handler AUN does not allow (`@rpc` or `@message_handler`), an
    `@event` handler without resolvable type hints, or an override that would silently disable an
    inherited `@event` handler."""


class BudgetExceeded(AUNError):
    """A budget stopped a send or a model call (see [`Budgets`][aun_runtime.Budgets]). The stop is
    recorded (`budget_stop`), counted and logged; a handler that meets one simply ends."""

    #: What the message says to do about it.
    advice = "raise AUNRuntime(budgets=Budgets(...)) or register_agent(..., budgets=...) if more is intended"
    #: What was refused.
    refused = "refused"

    def __init__(self, reason: str) -> None:
        super().__init__(f"{self.refused}: {reason} ({self.advice})")
        #: Which budget was reached, and how far.
        self.reason = reason


class ThreadBudgetExceeded(BudgetExceeded):
    """A send was refused: its thread is full, or its sender used its unaddressed replies there."""

    refused = "send refused"


class ModelBudgetExceeded(BudgetExceeded):
    """A model call was refused before it was made: the agent reached one of its model budgets."""

    refused = "model call refused"


class ConfigurationError(AUNError):
    """A setting cannot work as given: a database that refuses the connection or holds tables that
    are not the runtime's, a file that is no file of the kind asked for, an address that cannot be
    served. Found before anything is created or changed; on the command line, one line and exit 2.

    Args:
        message: what is wrong, and what to do about it.
        value: the value of the setting, as it may be shown (a URL without its password): lets a
            command name the option that was given it.
    """

    def __init__(self, message: str, *, value: str | None = None) -> None:
        super().__init__(message)
        #: The setting's value, as it may be shown (None: not known).
        self.value = value


class TransientError(AUNError):
    """A failure that may pass by itself (a model endpoint rate-limiting, down or answering
    nonsense for a while). A turn that ends with one is tried again under its agent's
    [`TurnRetry`][aun_runtime.TurnRetry] policy, and after the last try its message is a dead letter
    marked retryable, which [`AUNRuntime.redrive`][aun_runtime.AUNRuntime.redrive] (or `aun-runtime
    dead-letters retry`) can deliver again later."""


class StorageUnavailableError(ConfigurationError):
    """The database of an archive, journal or ledger cannot be opened: a PostgreSQL server that
    cannot be reached or refuses the connection, a database that does not exist or holds tables
    that are not the runtime's, or asyncpg not installed."""


class DatabaseUnreachableError(StorageUnavailableError):
    """The database server did not answer, refused the connection or is starting: it may come up.
    A command started beside its database (`run`, `worker`) waits for it up to its connect timeout
    before this is its configuration error."""


class StorageSessionLostError(AUNError):
    """The session with the PostgreSQL server ended (the server went away, or found this process
    cut off): nothing more is committed through it. A worker whose journal lost its session stops;
    its claims pass to the other instances, and it settles the rest when it is started again."""


class FencedError(StorageSessionLostError):
    """A commit was refused because this worker no longer holds its proof of life in the database:
    another instance may have taken its work, so committing a handling now could handle it twice."""
