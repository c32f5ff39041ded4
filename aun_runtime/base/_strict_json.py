"""The JSON an AUN client accepts, which is stricter than the JSON standard.

fastaun 0.5.25 parses every frame with a strict parser and refuses the whole frame, dropping its
connection, when anything in it is outside these rules:

* integers within ±(2^53-1), the range a double holds exactly (what JavaScript calls safe);
* other numbers finite and within the same range (`1e400` is infinity, `1e300` too large);
* strings and keys with no half of a UTF-16 surrogate pair;
* no object key twice.

A value the gateway accepts is relayed as it is, so one value outside these rules would disconnect
every receiver again at each reconnect. `find_unsafe` names the first such place, and any
nesting past `MAX_DEPTH` (a relayed payload sits a few levels deeper in its frame, and a
parser's recursion has a limit too): the gateway refuses requests with one, and the gateway agent
recognises them in frames another gateway relayed.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_SAFE_INTEGER", "find_unsafe", "join_path"]

#: The largest integer an AUN client reads, 2^53-1 (also the bound for any other number).
MAX_SAFE_INTEGER = 2**53 - 1
#: Objects and arrays nested deeper than this (the params object counts as the first level).
MAX_DEPTH = 64
#: The longest key written into a path: a path names a field, it does not echo a hostile key whole.
_KEY_IN_PATH = 64

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE = "holds half of a UTF-16 surrogate pair, which is no character"

Path = list[str | int]


def _number_problem(value: int | float) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number (NaN and Infinity are not JSON)"
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return None
    kind = "an integer" if isinstance(value, int) else "a number"
    return f"is {kind} outside ±(2^53-1), which AUN clients cannot read: send it as a string"


def _plainly_fine(item: Any) -> bool:
    """True for the common scalars that need no closer look (a fast path: no call per number)."""
    kind = type(item)
    if kind is int:
        return bool(-MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
    if kind is str:
        return _LONE_SURROGATE.search(item) is None
    return item is None or kind is bool


def _find(value: Any, depth: int, max_depth: int) -> tuple[Path, str] | None:
    # Recursion is bounded by max_depth; the path is built on the way back, only on a finding.
    if isinstance(value, str):
        return ([], _SURROGATE) if _LONE_SURROGATE.search(value) else None
    if isinstance(value, dict):
        if depth >= max_depth:
            return [], f"is nested deeper than {max_depth} levels"
        for key, item in value.items():
            if isinstance(key, str) and _LONE_SURROGATE.search(key):
                return [key], "is a key that " + _SURROGATE
            if _plainly_fine(item):
                continue
            found = _find(item, depth + 1, max_depth)
            if found is not None:
                found[0].append(str(key))
                return found
        return None
    if isinstance(value, list):
        if depth >= max_depth:
            return [], f"is nested deeper than {max_depth} levels"
        for index, item in enumerate(value):
            if _plainly_fine(item):
                continue
            found = _find(item, depth + 1, max_depth)
            if found is not None:
                found[0].append(index)
                return found
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        problem = _number_problem(value)
        return None if problem is None else ([], problem)
    refused = getattr(value, "refused", None)  # a place a lenient parse kept, already judged
    return [], refused if isinstance(refused, str) else f"is a {type(value).__name__}, which is no JSON value"


def join_path(parts: list[str | int], prefix: str = "") -> str:
    """`["payload", "items", 2, "n"]` as `payload.items[2].n` (long keys shortened)."""
    path = prefix
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            key = _LONE_SURROGATE.sub("\ufffd", part)  # a path is text that can be written anywhere
            key = key if len(key) <= _KEY_IN_PATH else key[:_KEY_IN_PATH] + "…"
            path = f"{path}.{key}" if path else key
    return path


def find_unsafe(value: Any, prefix: str = "", *, max_depth: int = MAX_DEPTH) -> tuple[str, str] | None:
    """The first place in `value` an AUN client would refuse, as `(path, what is wrong)`.

    `prefix` is the path of `value` itself ("" for a params object, whose fields are named
    bare: `payload.data.n`). None: a client reads all of it.
    """
    found = _find(value, 1, max_depth)
    if found is None:
        return None
    parts, problem = found
    return join_path(parts[::-1], prefix) or "params", problem
