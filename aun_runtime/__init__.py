"""aun-runtime: an actor-model multi-agent runtime on autogen-core with AUN semantics.

A message is delivered; the receiver decides, on its own, whether, when and how many times to answer.
Handlers are ``@event`` only, each agent takes its messages one at a time, replies are explicit sends,
and every message is archived, including those an agent's channel kept from it.

The public API is what ``__all__`` lists; every other module is private.
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
from ._agent_state import AgentStateStore, MemoryStateStore
from ._archive import Archive, ArchiveRecord, RecordKind
from ._budgets import DEFAULT_BUDGETS, BudgetLedger, Budgets, is_addressed
from ._core import AUNSingleThreadedRuntime
from ._errors import (
    AgentRegistrationError,
    BudgetExceeded,
    HandlerDefinitionError,
    HopLimitExceeded,
    MailboxFullError,
    ModelBudgetExceeded,
    NoRouteError,
    NotAGroupMemberError,
    RPCForbiddenError,
    RuntimeStoppedError,
    ThreadBudgetExceeded,
    UndeliverableError,
    UnknownAIDError,
    UnknownGroupError,
)
from ._inbox import Inbox
from ._mailbox import Mailbox, OverflowPolicy
from ._runtime import AUNRuntime, GroupInfo
from ._sqlite_state import SQLiteStateStore
from ._stats import RuntimeStats
from .agentmd import AgentCard, AgentMDError

__all__ = [
    "DEFAULT_BUDGETS",
    "AUNActorRuntime",
    "AUNAgent",
    "AUNContract",
    "AUNError",
    "AUNMessage",
    "AUNRuntime",
    "AUNSingleThreadedRuntime",
    "AgentCard",
    "AgentMDError",
    "AgentRegistrationError",
    "AgentStateStore",
    "Archive",
    "ArchiveRecord",
    "BudgetExceeded",
    "BudgetLedger",
    "Budgets",
    "DispatchMode",
    "GroupInfo",
    "HandlerDefinitionError",
    "HopLimitExceeded",
    "Inbox",
    "InvalidAIDError",
    "InvalidGroupIdError",
    "InvalidMessageError",
    "JsonPayload",
    "Mailbox",
    "MailboxFullError",
    "MemoryStateStore",
    "MessageContext",
    "ModelBudgetExceeded",
    "NoRouteError",
    "NotAGroupMemberError",
    "OverflowPolicy",
    "PayloadTooLargeError",
    "RPCForbiddenError",
    "RecordKind",
    "RuntimeStats",
    "RuntimeStoppedError",
    "SQLiteStateStore",
    "TextPayload",
    "ThreadBudgetExceeded",
    "ToolCallPayload",
    "ToolResultPayload",
    "UndeliverableError",
    "UnknownAIDError",
    "UnknownGroupError",
    "UnknownPayload",
    "event",
    "is_addressed",
]
