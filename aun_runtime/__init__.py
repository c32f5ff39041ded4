"""aun-runtime: an actor-model multi-agent runtime on autogen-core with AUN semantics.

A message is delivered; the receiver decides, on its own, whether, when and how many times to answer.
Handlers are `@event` only, each agent takes its messages one at a time, replies are explicit sends,
and every message is archived, including those an agent's channel kept from it.

The public API is what the public modules' `__all__` lists: this package, and

* [`aun_runtime.models`][aun_runtime.models] (model clients: cassettes, scripted, metered, from the environment),
* [`aun_runtime.testing`][aun_runtime.testing] (small agents for tests and examples),
* `aun_runtime.agentmd` (agent.md cards),
* [`aun_runtime.gateway`][aun_runtime.gateway] (the local AUN gateway server),
* [`aun_runtime.network`][aun_runtime.network] (the gateway agent: a runtime's agents on an AUN network),
* [`aun_runtime.distributed`][aun_runtime.distributed] (the gRPC host and its workers),
* `aun_runtime.console` (the web console),
* `aun_runtime.cli` (the `aun-runtime` command).

Every module whose name starts with `_` is private. The message model and its errors are defined
in `protocols` and re-exported here, so that an application needs one import line.
"""

from autogen_core import MessageContext

from protocols.aun import (
    AUNMessage,
    DispatchMode,
    JsonPayload,
    TextPayload,
    ToolCallPayload,
    ToolResultPayload,
    UnknownPayload,
)
from protocols.contract import AUNContract
from protocols.errors import (
    AUNError,
    InvalidAIDError,
    InvalidGroupIdError,
    InvalidMessageError,
    PayloadTooLargeError,
)

from ._actor_runtime import AUNActorRuntime
from ._agent import AUNAgent, event
from ._agent_host import AgentHost
from ._agent_state import AgentStateStore, MemoryStateStore
from ._archive import Archive, ArchiveRecord, RecordKind
from ._archive_writer import ArchiveWriteError
from ._budgets import DEFAULT_BUDGETS, BudgetLedger, Budgets, is_addressed
from ._busy import AgentBusy
from ._core_protocol import AUNCore
from ._errors import (
    AgentCreationError,
    AgentRegistrationError,
    BudgetExceeded,
    ConfigurationError,
    FencedError,
    HandlerDefinitionError,
    HandlerTimeoutError,
    HopLimitExceeded,
    InterventionHandlerError,
    MailboxFullError,
    MessageDroppedError,
    ModelBudgetExceeded,
    NoRouteError,
    NotAGroupMemberError,
    OutboxFullError,
    RPCForbiddenError,
    RuntimeStoppedError,
    StorageSessionLostError,
    StorageUnavailableError,
    ThreadBudgetExceeded,
    TransientError,
    UndeliverableError,
    UnknownAIDError,
    UnknownGroupError,
)
from ._inbox import Inbox
from ._mailbox import Mailbox, MailboxOptions, OverflowPolicy
from ._payload import PayloadLike
from ._runtime import AUNRuntime, GroupInfo
from ._single_threaded import AUNSingleThreadedRuntime
from ._sqlite_state import SQLiteStateStore
from ._stats import RuntimeStats
from ._turn_retry import DEFAULT_TURN_RETRY, TurnRetry
from ._turns import DEFAULT_HANDLER_TIMEOUT, RUNTIME_DEFAULT
from .agentmd import AgentCard, AgentMDError
from .storage import Storage

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_HANDLER_TIMEOUT",
    "DEFAULT_TURN_RETRY",
    "RUNTIME_DEFAULT",
    "AUNActorRuntime",
    "AUNAgent",
    "AUNContract",
    "AUNCore",
    "AUNError",
    "AUNMessage",
    "AUNRuntime",
    "AUNSingleThreadedRuntime",
    "AgentBusy",
    "AgentCard",
    "AgentCreationError",
    "AgentHost",
    "AgentMDError",
    "AgentRegistrationError",
    "AgentStateStore",
    "Archive",
    "ArchiveRecord",
    "ArchiveWriteError",
    "BudgetExceeded",
    "BudgetLedger",
    "Budgets",
    "ConfigurationError",
    "DispatchMode",
    "FencedError",
    "GroupInfo",
    "HandlerDefinitionError",
    "HandlerTimeoutError",
    "HopLimitExceeded",
    "Inbox",
    "InterventionHandlerError",
    "InvalidAIDError",
    "InvalidGroupIdError",
    "InvalidMessageError",
    "JsonPayload",
    "Mailbox",
    "MailboxFullError",
    "MailboxOptions",
    "MemoryStateStore",
    "MessageContext",
    "MessageDroppedError",
    "ModelBudgetExceeded",
    "NoRouteError",
    "NotAGroupMemberError",
    "OutboxFullError",
    "OverflowPolicy",
    "PayloadLike",
    "PayloadTooLargeError",
    "RPCForbiddenError",
    "RecordKind",
    "RuntimeStats",
    "RuntimeStoppedError",
    "SQLiteStateStore",
    "Storage",
    "StorageSessionLostError",
    "StorageUnavailableError",
    "TextPayload",
    "ThreadBudgetExceeded",
    "ToolCallPayload",
    "ToolResultPayload",
    "TransientError",
    "TurnRetry",
    "UndeliverableError",
    "UnknownAIDError",
    "UnknownGroupError",
    "UnknownPayload",
    "event",
    "is_addressed",
]
