"""Errors of the local gateway: the codes it answers on the wire and the exceptions it raises in Python.

Every wire error is a JSON-RPC 2.0 error object `{code, message, data?}`. The codes are the AUN ones
(the public protocol's error table), so the real client maps each to its own exception class:
-32003 to `AuthError`, -32004 to `PermissionError`, -32602 to `ValidationError`, -330xx to the
group errors, -32429 to `RateLimitError`. `data.field` names the offending parameter when there
is one, so a caller can say which input was wrong.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from protocols.errors import AUNError

from ..base._errors import ConfigurationError

__all__ = ["ErrorCode", "GatewayError", "GatewayStartError", "RPCError"]


class ErrorCode(IntEnum):
    """The JSON-RPC error codes this gateway answers with."""

    PARSE_ERROR = -32700  #: the frame is not JSON
    INVALID_REQUEST = -32600  #: JSON, but not a JSON-RPC 2.0 request (or a frame over the size bound)
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602  #: ``data.field`` names the parameter
    INTERNAL_ERROR = -32603
    AUTH_FAILED = -32001  #: bad or unknown token, unknown AID, bad login proof
    NONCE_INVALID = -32002  #: challenge or login nonce unknown, used or past its deadline
    SIGNATURE_INVALID = -32003  #: ``client_signature`` does not verify or names another AID
    PERMISSION_DENIED = -32004  #: acting on another AID's inbox, cursor or device
    TOKEN_EXPIRED = -32005
    NOT_CONNECTED = -32013  #: a method other than ``auth.*`` before ``auth.connect``
    CONNECT_TOKEN_INVALID = 4001  #: ``auth.connect`` with an unknown, revoked or expired access token
    CONNECT_CONFLICT = 4009  #: ``auth.connect`` whose ``delivery_mode`` or queue slot clashes with the AID's online connections
    CONNECT_NONCE_INVALID = 4010  #: ``auth.connect`` with another socket's or an expired challenge nonce
    CONNECTION_LIMIT = 4012  #: ``auth.connect`` past ``max_connections_per_aid`` (retryable)
    RATE_LIMITED = -32429  #: the connection's request budget is spent; retry after ``data.retry_after_ms``
    GROUP_NOT_FOUND = -33001
    GROUP_STATE_INVALID = -33002  #: the group's state does not allow this (e.g. renewing an unbound AID)
    #: a bound of the group is reached (pending invitations per group or per invited AID)
    GROUP_LIMIT_REACHED = -33004
    GROUP_ALREADY_MEMBER = -33005
    GROUP_NOT_MEMBER = -33006
    GROUP_ROLE_INSUFFICIENT = -33007
    #: no pending invitation of that id for this AID (accepted, rejected, revoked, expired or never made)
    GROUP_INVITE_INVALID = -33008
    #: group E2EE: the request was made against an older signed state (or epoch) than the group's
    #: current one; the client refreshes its ``group.v2.bootstrap`` and retries
    GROUP_E2EE_STALE = -33050
    #: group E2EE: an encrypted message lacks a key wrap for a member the current state names
    GROUP_E2EE_RECIPIENTS_INCOMPLETE = -33052
    #: P2P E2EE: an encrypted message is not wrapped for a device of the receiver that must read it
    #: (a queue member that joined after the sender fetched ``message.v2.bootstrap``); the AUN client
    #: treats the code as retryable, drops its cached bootstrap and sends again wrapped for every
    #: device. The same value as :attr:`GROUP_E2EE_STALE`, the AUN code for a stale recipient set.
    E2EE_RECIPIENTS_STALE = -33050


class GatewayError(AUNError):
    """Base class of the errors the gateway raises in Python."""


class GatewayStartError(GatewayError, ConfigurationError):
    """The gateway could not start: the data directory is unusable or the address is taken (a
    configuration error: exit 2 on the command line)."""


class RPCError(GatewayError):
    """An error answered to one request, as a JSON-RPC error object."""

    def __init__(self, code: ErrorCode, message: str, **data: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC `error` member."""
        error: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data:
            error["data"] = self.data
        return error

    @classmethod
    def bad_param(cls, field: str, message: str, **data: Any) -> RPCError:
        """An invalid-params error that names `field`."""
        return cls(ErrorCode.INVALID_PARAMS, message, field=field, **data)
