"""Thoughts on the wire (``GatewayAgentConfig.thoughts``): what an exposed agent thinks about a
direct message from the network is put as an AUN thought for that conversation.

Two small hooks, installed only when the option is on (off, nothing is wrapped and arrivals cost
nothing more): the delivery of arrivals remembers which direct message came from whom, and the
archive's thought watch (:meth:`~aun_runtime.Archive.watch_thoughts`) hands each thought about one of those messages to the exposed AID's
own client, whose ``message.thought.put`` encrypts it for the sender as it encrypts a message. A
thought is never sent as a message, and one about anything else (a local message, a group one, no
message) stays in the archive only.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from protocols.aun import AUNMessage

if TYPE_CHECKING:
    from aun_runtime import Archive

    from ._link import AIDLink

__all__ = ["MAX_CONVERSATIONS", "ThoughtRelay"]

log = logging.getLogger("aun_runtime.gateway")

#: Direct arrivals remembered, per gateway agent, so a thought about one can find its sender. An
#: agent thinks about a message while handling it, right after it arrived; a few thousand covers
#: every message still waiting in the mailboxes (past it the oldest is forgotten and a thought about
#: it stays in the archive only), at some 200 bytes each.
MAX_CONVERSATIONS = 4096

Arrivals = Sequence[tuple[AUNMessage, str]]


class ThoughtRelay:
    """Puts the thoughts of exposed agents about direct network messages as AUN thoughts.

    Args:
        archive: the runtime's archive (its thoughts are watched while installed).
        links: the gateway agent's links, by exposed AID (read when a thought comes).
        encrypt: end-to-end encrypt the thoughts (``GatewayAgentConfig.encrypt``).
    """

    def __init__(self, archive: Archive, links: dict[str, AIDLink], *, encrypt: bool) -> None:
        self.archive = archive
        self.links = links
        self.encrypt = encrypt
        self.put = 0  #: thoughts the network took
        self._senders: OrderedDict[tuple[str, str], str] = OrderedDict()  # (recipient, message_id) -> sender
        self._tasks: set[asyncio.Task[None]] = set()
        self._unwatch: Callable[[], None] | None = None

    def deliver(self, deliver: Callable[[Arrivals], Awaitable[None]]) -> Callable[[Arrivals], Awaitable[None]]:
        """``deliver``, remembering who sent each direct arrival first."""

        async def remembering(arrivals: Arrivals) -> None:
            for message, recipient in arrivals:
                if message.group_id is None:
                    self._senders[(recipient, message.message_id)] = message.from_aid
                    if len(self._senders) > MAX_CONVERSATIONS:
                        self._senders.popitem(last=False)
            await deliver(arrivals)

        return remembering

    def install(self) -> None:
        self._unwatch = self.archive.watch_thoughts(self._on_thought)

    async def uninstall(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _on_thought(self, owner: str, text: str, about: str | None = None) -> None:
        peer = None if about is None else self._senders.get((owner, about))
        link = self.links.get(owner)
        if peer is None or link is None or about is None:
            return
        task = asyncio.get_running_loop().create_task(self._put(link, peer, about, text), name=f"aun:thought:{owner}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _put(self, link: AIDLink, peer: str, about: str, text: str) -> None:
        params: dict[str, Any] = {
            "to": peer, "payload": {"type": "text", "text": text}, "context": {"type": "message", "id": about},
            "encrypt": self.encrypt,
        }
        try:
            await link.wait_connected()
            await link.client.call("message.thought.put", params)
            self.put += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a thought is not a message: lost, it is only logged
            log.warning("%s: a thought about %s could not be put for %s: %s", link.aid, about, peer, exc)
