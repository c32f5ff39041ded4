"""Thoughts on the wire (`GatewayAgentConfig.thoughts`): what an exposed agent thinks about a
message from the network is put as an AUN thought about it, for that conversation or that group.

Two small hooks, installed only when the option is on (off, nothing is wrapped and arrivals cost
nothing more): the delivery of arrivals remembers where each message from the network came from
(its sender, or its group), and the archive's thought watch
([`watch_thoughts`][aun_runtime.Archive.watch_thoughts]) hands each thought about one of those messages to the
exposed AID's own client. A thought about a direct message goes with `message.thought.put`,
encrypted for the sender as a message is; one about a group message with `group.thought.put`,
encrypted for the group's members as a group message is, which only members read. A thought is
never sent as a message, and one about anything else (a local message, no message) stays in the
archive only.

A runtime group's copy for a member elsewhere arrives as a direct message carrying its group, which
is no group on the network: the network refuses a group thought about it (no such group, or not a
member), and the AID's later thoughts about that group are not tried again (they stay in the archive).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from protocols.aun import AUNMessage

from ._verdict import describe

if TYPE_CHECKING:
    from aun_runtime import Archive

    from ._link import AIDLink

__all__ = ["MAX_CONVERSATIONS", "ThoughtRelay"]

log = logging.getLogger("aun_runtime.gateway")

#: Arrivals remembered, per gateway agent, so a thought about one can find its sender or group. An
#: agent thinks about a message while handling it, right after it arrived; a few thousand covers
#: every message still waiting in the mailboxes (past it the oldest is forgotten and a thought about
#: it stays in the archive only), at some 200 bytes each. The groups found not to be on the network
#: (a runtime group's copies) are bounded by the same number.
MAX_CONVERSATIONS = 4096

#: The network's answers to a group thought that say the group is not one this AID is in: no such
#: group (-33001), not a member (-33006). Any other failure may pass, so it is tried next time.
_NOT_ITS_GROUP = frozenset({-33001, -33006})

Arrivals = Sequence[tuple[AUNMessage, str]]
#: Where a thought about a message goes: ``("to", sender)`` for a direct message, ``("group_id",
#: group)`` for a group message (the name is the ``*.thought.put`` parameter it fills).
Topic = tuple[str, str]


class ThoughtRelay:
    """Puts the thoughts of exposed agents about network messages (direct or group) as AUN thoughts.

    Args:
        archive: the runtime's archive (its thoughts are watched while installed).
        links: the gateway agent's links, by exposed AID (read when a thought comes).
        encrypt: end-to-end encrypt the thoughts (`GatewayAgentConfig.encrypt`).
    """

    def __init__(self, archive: Archive, links: dict[str, AIDLink], *, encrypt: bool) -> None:
        self.archive = archive
        self.links = links
        self.encrypt = encrypt
        self.put = 0  #: thoughts the network took
        self._topics: OrderedDict[tuple[str, str], Topic] = OrderedDict()  # (recipient, message_id) -> topic
        self._off_network: OrderedDict[tuple[str, str], None] = OrderedDict()  # (aid, group) refused
        self._tasks: set[asyncio.Task[None]] = set()
        self._unwatch: Callable[[], None] | None = None

    def deliver(self, deliver: Callable[[Arrivals], Awaitable[None]]) -> Callable[[Arrivals], Awaitable[None]]:
        """`deliver`, remembering first where each arrival came from (its sender or group)."""

        async def remembering(arrivals: Arrivals) -> None:
            for message, recipient in arrivals:
                topic = ("to", message.from_aid) if message.group_id is None else ("group_id", message.group_id)
                self._topics[(recipient, message.message_id)] = topic
                if len(self._topics) > MAX_CONVERSATIONS:
                    self._topics.popitem(last=False)
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
        topic = None if about is None else self._topics.get((owner, about))
        link = self.links.get(owner)
        if topic is None or link is None or about is None:
            return
        if topic[0] == "group_id" and (owner, topic[1]) in self._off_network:
            return
        task = asyncio.get_running_loop().create_task(self._put(link, topic, about, text), name=f"aun:thought:{owner}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _put(self, link: AIDLink, topic: Topic, about: str, text: str) -> None:
        key, where = topic
        method = "message.thought.put" if key == "to" else "group.thought.put"
        params: dict[str, Any] = {
            key: where, "payload": {"type": "text", "text": text}, "context": {"type": "message", "id": about},
            "encrypt": self.encrypt,
        }
        try:
            await link.wait_connected()
            await link.client.call(method, params)
            self.put += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a thought is not a message: lost, it is only logged
            if key == "group_id" and getattr(exc, "code", None) in _NOT_ITS_GROUP:
                # Not a group of the network this AID is in (a runtime group's copy): not again.
                self._off_network[(link.aid, where)] = None
                if len(self._off_network) > MAX_CONVERSATIONS:
                    self._off_network.popitem(last=False)
            log.warning("%s: a thought about %s could not be put for %s: %s", link.aid, about, where, describe(exc))
