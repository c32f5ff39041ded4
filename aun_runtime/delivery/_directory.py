"""Where AIDs held by other processes stand, and who the groups' members are: the `Directory`.

A core that is one of several processes (a distributed worker) knows what the others hold and keeps
the cluster's groups; it offers that as its `core.directory`. A core of one process has none, and
the runtime keeps its groups itself in `aun_runtime.delivery._local_groups.LocalGroups`, which is a
`Directory` where no AID lives elsewhere. Either way the runtime's `Placement`
(`aun_runtime.delivery._placement`) asks a directory, so nothing above it branches on which kind it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable

from protocols.aun import DispatchMode

from ..base._groups import GroupInfo

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

    def delivery_order(self, group_id: str) -> list[str]:
        """The group's members, in the order the copies of a post go out to them."""
        ...

    def registered(self, aid: str) -> None:
        """An agent for `aid` was registered in this process (a member may now be reached here)."""
        ...

    def next_seq(self, group_id: str) -> int | None:
        """The `seq` of the group's next post, taken now; None where posts are not numbered here."""
        ...

    def was_member(self, group_id: str, aid: str, seq: int) -> bool:
        """Whether `aid` was a member when post `seq` was made (True where that is not measured here)."""
        ...
