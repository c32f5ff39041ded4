"""Host-name answers shared by a gateway agent's AUN clients: one lookup per host, not one per AID.

Registering an AID, the AUN client (`fastaun` 0.5.25) looks for the AID's agent.md: at the
gateway, then, not found there (a new AID has none yet), at its issuer's name service
(`http://<issuer>/agent.md`: `aun.localhost` for the local gateway, a name that does not
resolve here). Each HTTP request of the client goes through an `aiohttp` session of its own,
whose default resolver asks the system for the host every time, on the loop's few resolver
threads. A thousand AIDs ask a thousand times for the same name, at once; failing lookups queue
there (100 concurrent ones took 20 s on the measuring machine, one took 3 ms), and that was most
of the time 100 AIDs took to connect.

`share_host_answers` makes every such lookup made from the calling task (and the tasks it
starts: the link's client, its connection, its requests) ask `HOST_ANSWERS` instead: one
lookup per (host, port, family) and loop at a time, its answer, positive or negative, kept
`ANSWER_TTL` seconds. The lookup itself is `aiohttp`'s own, and a host that does not
resolve fails as it would (`socket.gaierror`, which `aiohttp` reports as a DNS error): only
how often the system is asked changes. Outside those tasks nothing changes: the hook on
`aiohttp`'s default resolver passes every other lookup through as it comes, so a plain client in
the same process keeps its defaults.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

__all__ = ["ANSWER_TTL", "HOST_ANSWERS", "MAX_HOSTS", "HostAnswers", "share_host_answers"]

#: Seconds an answer is kept: long enough for a burst of connections, short enough that a host
#: coming up (or going away, or moving) is seen again soon.
ANSWER_TTL = 10.0
#: Answers kept at once (the oldest goes first); a gateway agent's clients meet a few hosts.
MAX_HOSTS = 256

_Key = tuple[str, int, int]
_Answer = list[dict[str, Any]] | tuple[Any, ...]  # what resolved, or the gaierror's arguments
Lookup = Callable[[], Awaitable[list[dict[str, Any]]]]


class HostAnswers:
    """Answers of host-name lookups, asked once per (host, port, family) and kept `ttl` seconds.

    Args:
        ttl: seconds an answer is kept.
        max_hosts: answers kept at once.
    """

    def __init__(self, ttl: float = ANSWER_TTL, max_hosts: int = MAX_HOSTS) -> None:
        self._ttl = ttl
        self._max_hosts = max_hosts
        self._answers: OrderedDict[_Key, tuple[float, _Answer]] = OrderedDict()  # key -> (expiry, answer)
        # The lookup under way, per loop (a task belongs to one loop; tests run several in turn).
        self._asking: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_Key, asyncio.Task[_Answer]]] = (
            weakref.WeakKeyDictionary())
        self.lookups = 0  #: lookups made; every other answer came from what was kept

    async def resolve(self, host: str, port: int, family: int, lookup: Lookup) -> list[dict[str, Any]]:
        """The addresses of `host`: kept ones if fresh, else `lookup`'s, which every concurrent
        caller for the same key shares.

        Raises:
            socket.gaierror: the host does not resolve (now, or when it was last asked).
        """
        key = (host.lower(), port, int(family))
        kept = self._answers.get(key)
        if kept is None or kept[0] <= time.monotonic():
            loop = asyncio.get_running_loop()
            asking = self._asking.setdefault(loop, {})
            pending = asking.get(key)
            if pending is None:
                pending = asking[key] = loop.create_task(self._ask(key, lookup))
                pending.add_done_callback(lambda _: asking.pop(key, None))
            answer = await asyncio.shield(pending)  # one caller giving up does not cancel the others' lookup
        else:
            answer = kept[1]
        if isinstance(answer, tuple):
            raise socket.gaierror(*answer)  # a fresh one each time: a raised error keeps its traceback
        return [dict(address) for address in answer]

    async def _ask(self, key: _Key, lookup: Lookup) -> _Answer:
        self.lookups += 1
        answer: _Answer
        try:
            answer = [dict(address) for address in await lookup()]
        except socket.gaierror as exc:
            answer = exc.args
        self._answers[key] = (time.monotonic() + self._ttl, answer)
        self._answers.move_to_end(key)
        while len(self._answers) > self._max_hosts:
            self._answers.popitem(last=False)
        return answer


#: The answers a process's gateway agents share.
HOST_ANSWERS = HostAnswers()
#: The answers lookups made in this context use; None: the resolver's own, as it comes.
_SHARED: ContextVar[HostAnswers | None] = ContextVar("aun_runtime_host_answers", default=None)
_HOOKED = False
_HOOK_LOCK = threading.Lock()


def share_host_answers(answers: HostAnswers = HOST_ANSWERS) -> bool:
    """Have the lookups of `aiohttp`'s default resolver made from this task, and the tasks it
    starts from now on, use `answers`. False if the resolver is not the one this is written for
    (then nothing is changed)."""
    if not _hook():
        return False
    _SHARED.set(answers)
    return True


def _hook() -> bool:
    global _HOOKED
    try:
        from aiohttp.resolver import ThreadedResolver
    except ImportError:
        return False
    with _HOOK_LOCK:
        if _HOOKED:
            return True
        own = getattr(ThreadedResolver, "resolve", None)
        if not callable(own):
            return False

        async def resolve(self: Any, host: str, port: int = 0, family: int = socket.AF_INET) -> Any:
            answers = _SHARED.get()
            if answers is None:  # not one of ours: exactly as it comes
                return await own(self, host, port, family)
            return await answers.resolve(host, port, family, lambda: own(self, host, port, family))

        ThreadedResolver.resolve = resolve  # type: ignore[method-assign]
        _HOOKED = True
        return True
