"""JSON-RPC 2.0 framing: one text frame in, one `Request` or one [`RPCError`][aun_runtime.gateway.RPCError] out.

The parser never raises on hostile input: anything that is not a single JSON-RPC 2.0 request object
becomes the specific error the specification names (-32700 for bytes that are not JSON, -32600 for
JSON that is not a request), and the server answers it and keeps the socket open. Batches are
refused (-32600): the AUN client never sends them, and answering them would let one frame buy many
requests past the rate limit.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ..base._strict_json import MAX_SAFE_INTEGER
from ._errors import ErrorCode, RPCError

__all__ = ["Params", "Request", "dumps", "error_frame", "notification_frame", "parse_frame", "result_frame"]

RequestId = str | int | float | None

_MISSING: Any = object()
#: A method name longer than this is no method we know; refuse it before looking it up.
MAX_METHOD_LENGTH = 128
#: A request id is echoed back verbatim, so it is bounded like any other string we store or send.
MAX_ID_LENGTH = 256


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed JSON-RPC request. `id` is None for a notification (no answer is sent)."""

    id: RequestId
    method: str
    params: dict[str, Any]
    is_notification: bool


# Built once: `json.dumps`/`json.loads` with any option build a new encoder/decoder per call,
# which is a measurable part of a relayed message (three encodings and one parse each).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    """Compact JSON with non-ASCII text kept as is (the client hashes params the same way).

    Never NaN or Infinity: those are not JSON, and a client refuses the whole frame.
    """
    return _ENCODER.encode(value)


def result_frame(request_id: RequestId, result: Any) -> str:
    return dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_frame(request_id: RequestId, error: RPCError) -> str:
    return dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})


def notification_frame(method: str, params: dict[str, Any]) -> str:
    return dumps({"jsonrpc": "2.0", "method": method, "params": params})


def _valid_id(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return len(value) <= MAX_ID_LENGTH
    # Echoed back as it came: only numbers the client can read again (see _strict_json).
    if isinstance(value, int):
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    return isinstance(value, float) and math.isfinite(value) and abs(value) <= MAX_SAFE_INTEGER


# A JSON escape of a UTF-16 surrogate. In pairs they are one character (how ASCII-only encoders
# write an emoji); alone they decode to a string UTF-8 cannot carry, which would fail later, at
# storage, as an internal error. Only frames with such an escape are checked further.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _utf8_safe(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them unless told otherwise.
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse_frame(text: str) -> Request | tuple[RequestId, RPCError]:
    """Parse one text frame. On failure, return the id to answer with (None if unknown) and the error."""
    try:
        data = _DECODER.decode(text)
    except (ValueError, RecursionError):
        return None, RPCError(ErrorCode.PARSE_ERROR, "the frame is not valid JSON")
    if _SURROGATE_ESCAPE.search(text) is not None and not _utf8_safe(data):
        return None, RPCError(
            ErrorCode.PARSE_ERROR,
            "the frame escapes half of a UTF-16 surrogate pair (a lone \\uD800-\\uDFFF), which is no character",
        )
    if isinstance(data, list):
        return None, RPCError(
            ErrorCode.INVALID_REQUEST, "batch requests are not supported: send one request object per frame"
        )
    if not isinstance(data, dict):
        return None, RPCError(ErrorCode.INVALID_REQUEST, "a request is a JSON object")
    raw_id = data.get("id")
    request_id: RequestId = raw_id if _valid_id(raw_id) else None
    if not _valid_id(raw_id):
        return None, RPCError(
            ErrorCode.INVALID_REQUEST,
            f"'id' must be a string (at most {MAX_ID_LENGTH} characters) or a number within ±(2^53-1)",
        )
    if data.get("jsonrpc") != "2.0":
        return request_id, RPCError(ErrorCode.INVALID_REQUEST, "'jsonrpc' must be \"2.0\"")
    method = data.get("method")
    if not isinstance(method, str) or not method or len(method) > MAX_METHOD_LENGTH:
        return request_id, RPCError(
            ErrorCode.INVALID_REQUEST, f"'method' must be a non-empty string of at most {MAX_METHOD_LENGTH} characters"
        )
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return request_id, RPCError.bad_param("params", "'params' must be an object (named parameters)")
    return Request(id=request_id, method=method, params=params, is_notification="id" not in data)


class Params:
    """Typed access to a request's params; every failure is -32602 naming the field."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def _get(self, name: str, default: Any) -> Any:
        value = self.raw.get(name, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise RPCError.bad_param(name, f"'{name}' is required")
            return default
        return value

    def text(self, name: str, *, default: Any = _MISSING, max_length: int = 1024) -> Any:
        """A non-empty string of at most `max_length` characters (surrounding spaces removed)."""
        value = self._get(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value.strip():
            raise RPCError.bad_param(name, f"'{name}' must be a non-empty string")
        if len(value) > max_length:
            raise RPCError.bad_param(name, f"'{name}' is longer than {max_length} characters")
        return value.strip()

    def integer(self, name: str, *, default: Any = _MISSING, minimum: int = 0, maximum: int = MAX_SAFE_INTEGER) -> int:
        """An integer (a JSON number with no fraction; booleans refused) within the bounds.

        The upper bound is at most 2^53-1: a seq or limit past it is no seq this gateway gave out,
        and SQLite stores no integer past 2^63-1.
        """
        value = self._get(name, default)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise RPCError.bad_param(name, f"'{name}' must be an integer")
        maximum = min(maximum, MAX_SAFE_INTEGER)
        if value < minimum or value > maximum:
            raise RPCError.bad_param(name, f"'{name}' must be an integer from {minimum} to {maximum}")
        return int(value)

    def boolean(self, name: str, *, default: bool) -> bool:
        value = self._get(name, default)
        if not isinstance(value, bool):
            raise RPCError.bad_param(name, f"'{name}' must be true or false")
        return value

    def mapping(self, name: str, *, default: Any = _MISSING) -> Any:
        value = self._get(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, dict):
            raise RPCError.bad_param(name, f"'{name}' must be an object")
        return value
