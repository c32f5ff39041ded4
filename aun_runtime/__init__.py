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

from .api._agent import AUNAgent, event
from .api._busy import AgentBusy
from .api._inbox import Inbox
from .api._runtime import AUNRuntime, GroupInfo
from .base._agent_md import AgentCard, AgentMDError
from .base._budgets import DEFAULT_BUDGETS, BudgetLedger, Budgets, is_addressed
from .base._errors import (
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
from .base._payload import PayloadLike
from .base._stats import RuntimeStats
from .core._actor_runtime import AUNActorRuntime
from .core._single_threaded import AUNSingleThreadedRuntime
from .delivery._agent_host import AgentHost
from .delivery._core_protocol import AUNCore
from .delivery._mailbox import Mailbox, MailboxOptions, OverflowPolicy
from .delivery._turn_retry import DEFAULT_TURN_RETRY, TurnRetry
from .delivery._turns import DEFAULT_HANDLER_TIMEOUT, RUNTIME_DEFAULT
from .storage import Storage
from .storage._agent_state import AgentStateStore, MemoryStateStore
from .storage._archive import Archive, ArchiveRecord, RecordKind
from .storage._archive_writer import ArchiveWriteError
from .storage._sqlite_state import SQLiteStateStore

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
