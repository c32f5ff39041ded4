"""Frames the AUN client would refuse whole: the messages in them arrive as unreadable instead.

The client (fastaun 0.5.25) parses each frame strictly (see `aun_runtime.base._strict_json`) and, on
the first value outside its rules, drops the connection. Its reconnection pulls the same message, and
drops again: one such message from any sender, relayed by a gateway that does not refuse it, stops
everything that follows it. This module puts one guard in front of that parser for a gateway
agent's clients: a frame the strict parser refuses is parsed again leniently, each message
`payload` holding a refused value is replaced by a marker that names the place and the reason,
and the frame goes on. The client then delivers the message (and acknowledges it once handled);
the link records it as a dead letter, and what follows flows. A frame refused for a reason outside
any payload (or nested past what a parser takes) is refused as before: nothing is invented.

The guard replaces the client's own frame decoder on one transport object; it is written against
the pinned client (`CLIENT_PACKAGE`) and does nothing if that decoder is not where it expects.

It also reads the common frame faster than the client's parser, which walks every string of a
frame in Python looking for a surrogate half: about a tenth of a millisecond for each 3 KB
encrypted push, several times for each message bridged. `quick_read` applies the same rules
with that walk skipped where the text shows it cannot find anything, and gives up (the client's own
parser then runs, with its own verdict and errors) on anything it is not sure of.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ..base._strict_json import MAX_SAFE_INTEGER, find_unsafe
from ._client_internals import frame_decoder, replace_frame_decoder, transport_of

__all__ = ["UNREADABLE_TYPE", "guard_client", "quick_read", "salvage_frame", "unreadable_reason"]

log = logging.getLogger("aun_runtime.gateway")

#: ``payload.type`` of the marker a refused payload is replaced with.
UNREADABLE_TYPE = "aun_runtime.unreadable"


class _Refused:
    """A value the strict parser refuses, kept in its place so the walk can say where it was."""

    __slots__ = ("refused",)

    def __init__(self, refused: str) -> None:
        self.refused = refused


_OUTSIDE = "is a number outside ±(2^53-1)"


def _integer(token: str) -> int | _Refused:
    if len(token.lstrip("-")) > len(str(MAX_SAFE_INTEGER)):  # no int() of a huge token
        return _Refused(_OUTSIDE)
    value = int(token)
    return value if abs(value) <= MAX_SAFE_INTEGER else _Refused(_OUTSIDE)


def _number(token: str) -> float | _Refused:
    # The client's rule: finite, within ±(2^53-1), and no fraction lost by reading it as a double.
    exact = Decimal(token)
    value = float(token)
    if not math.isfinite(value):
        return _Refused("is not a finite number")
    if abs(exact) > MAX_SAFE_INTEGER:
        return _Refused(_OUTSIDE)
    if value.is_integer() and exact != exact.to_integral_value():
        return _Refused("is a number a double cannot hold exactly")
    return value


def _constant(token: str) -> _Refused:
    return _Refused(f"is {token}, which is not JSON")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        result[key] = _Refused("is a key given twice") if key in result else value
    return result


#: Nesting is not judged here: the lenient parse took it, and the frame is not parsed again.
_ANY_DEPTH = 10**6


class _NotQuick(ValueError):
    """The quick read cannot vouch for this frame: the client's parser must judge it."""


def _quick_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _NotQuick("a key given twice")
    return result


def _quick_integer(token: str) -> int:
    value = _integer(token)
    if isinstance(value, _Refused):
        raise _NotQuick(value.refused)
    return value


def _quick_number(token: str) -> float:
    value = _number(token)
    if isinstance(value, _Refused):
        raise _NotQuick(value.refused)
    return value


def _quick_constant(token: str) -> Any:
    raise _NotQuick(token)


#: A surrogate half, or a ``\u`` escape that may write one (``\\ud800``, an escaped backslash
#: before plain text, matches too: then the quick read only steps aside).
_MAY_HOLD_SURROGATE = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def quick_read(text: str) -> dict[str, Any] | None:
    """The frame as the client's strict parser would read it, or None when that parser must decide.

    A value comes back only when the text holds no surrogate half and no escape that could write
    one, no object repeats a key, and every number is within the client's rules: then the client's
    parser returns the same object, and its walk over every string would find nothing.
    """
    if _MAY_HOLD_SURROGATE.search(text) is not None:
        return None
    try:
        frame = json.loads(text, object_pairs_hook=_quick_object, parse_int=_quick_integer,
                           parse_float=_quick_number, parse_constant=_quick_constant)
    except (ValueError, RecursionError):
        return None
    return frame if isinstance(frame, dict) else None


def _replace_payloads(node: Any, reasons: list[str]) -> None:
    """Replace each `payload` value holding a refused place by the marker, outermost first."""
    if isinstance(node, dict):
        for key, item in node.items():
            found = find_unsafe(item, "payload", max_depth=_ANY_DEPTH) if key == "payload" else None
            if found is not None:
                reason = f"'{found[0]}' {found[1]}"
                node[key] = {"type": UNREADABLE_TYPE, "reason": reason}
                reasons.append(reason)
            else:
                _replace_payloads(item, reasons)
    elif isinstance(node, list):
        for item in node:
            _replace_payloads(item, reasons)


def salvage_frame(text: str) -> tuple[dict[str, Any], list[str]] | None:
    """The frame with every refused message payload replaced by the marker, and why each was; None
    if the frame cannot be read that way (it is no JSON object, or a refused place is outside any
    payload)."""
    try:
        frame = json.loads(
            text, object_pairs_hook=_object, parse_int=_integer, parse_float=_number, parse_constant=_constant
        )
    except (ValueError, RecursionError):
        return None
    if not isinstance(frame, dict):
        return None
    reasons: list[str] = []
    try:
        _replace_payloads(frame, reasons)
        if not reasons or find_unsafe(frame, max_depth=_ANY_DEPTH) is not None:
            return None
    except RecursionError:
        return None
    return frame, reasons


def unreadable_reason(payload: Any) -> str | None:
    """Why a message's payload was unreadable on arrival, if it is the marker."""
    if isinstance(payload, dict) and payload.get("type") == UNREADABLE_TYPE:
        reason = payload.get("reason")
        return reason if isinstance(reason, str) else "unreadable"
    return None


def guard_client(client: Any, aid: str, sift: Callable[[dict[str, Any]], None] | None = None) -> bool:
    """Put the guard in front of `client`'s frame decoder, and `sift` (if given) between it and
    the client: it sees each decoded frame first and may change it in place. False if the client is
    not the one this is written for (then nothing is changed)."""
    transport = transport_of(client)
    strict = frame_decoder(transport)
    if transport is None or strict is None:
        log.warning("%s: the AUN client has no frame decoder where expected; an unreadable message "
                    "will make it drop its connection", aid)
        return False

    def read(raw: Any) -> dict[str, Any]:
        if type(raw) is str:
            frame = quick_read(raw)
            if frame is not None:
                return frame
        try:
            return strict(raw)
        except Exception as exc:
            try:
                text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            except UnicodeDecodeError:
                text = None
            salvaged = salvage_frame(text) if isinstance(text, str) else None
            if salvaged is None:
                log.warning("%s: the AUN client refused a frame from the network (%s) and drops the connection",
                            aid, exc)
                raise
            frame, reasons = salvaged
            log.warning("%s: %d message(s) in a frame from the network cannot be read by the AUN client (%s); "
                        "each becomes a dead letter", aid, len(reasons), reasons[0])
            return frame

    def read_and_sift(raw: Any) -> dict[str, Any]:
        frame = read(raw)
        if sift is not None and type(frame) is dict:
            sift(frame)
        return frame

    replace_frame_decoder(transport, read if sift is None else read_and_sift)
    return True
