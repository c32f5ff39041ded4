"""What a core may know about AIDs and groups beyond its own process.

The in-process runtime knows everything itself: an AID is registered here or nowhere, and groups
live in the runtime. A core that is one of several processes (a distributed worker) also knows what
the others hold. It offers that knowledge as a `Directory`; [`AUNRuntime`][aun_runtime.AUNRuntime]
consults it for routing, unknown-AID detection and group membership when its core has one
(`core.directory`), and behaves exactly as before when it has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable

from protocols.aun import DispatchMode

from ._groups import GroupInfo

__all__ = ["AIDStatus", "Directory", "GroupInfo"]


class AIDStatus(StrEnum):
    """Where an AID stands in a directory."""

    HELD = "held"  #: a connected process holds it: messages go out now
    AWAY = "away"  #: its process went away without leaving: messages are kept until it is back
    UNKNOWN = "unknown"  #: nobody holds it


@runtime_checkable
class Directory(Protocol):
    """AIDs and groups held by other processes, and cluster-wide group changes.

    Group changes are made through the directory so that every process sees the same membership;
    a group message goes to the members the sending process sees when it sends.
    """

    #: True if the core keeps a message to an AID nobody holds and delivers it once one does.
    keeps_undeliverable: bool

    def aid_status(self, aid: str) -> AIDStatus:
        """Where `aid` stands (for an AID held elsewhere; local AIDs are the runtime's own)."""
        ...

    def group(self, group_id: str) -> GroupInfo | None:
        """The group as this process sees it, or None if there is no such group."""
        ...

    def group_ids(self) -> list[str]:
        """Every group this process sees."""
        ...

    async def create_group(
        self, group_id: str, members: Sequence[str], dispatch_mode: DispatchMode
    ) -> GroupInfo: ...

    async def add_member(self, group_id: str, aid: str) -> GroupInfo: ...

    async def remove_member(self, group_id: str, aid: str) -> GroupInfo: ...

    async def set_dispatch_mode(self, group_id: str, dispatch_mode: DispatchMode) -> GroupInfo: ...
