"""Groups: members, dispatch mode, and membership measured in group sequence numbers."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from protocols.aun import DispatchMode

__all__ = ["STILL_MEMBER", "GroupInfo", "GroupState"]

#: The end of the membership span of a member that has not left.
STILL_MEMBER = sys.maxsize


@dataclass(frozen=True)
class GroupInfo:
    """A group as it stands now."""

    group_id: str
    members: frozenset[str]
    dispatch_mode: DispatchMode


@dataclass
class GroupState:
    """A group's state. Membership is measured in group seqs: a member sees exactly the messages
    posted while it was a member, even when a change races with messages still in flight."""

    group_id: str
    dispatch_mode: DispatchMode
    #: In the order copies of a post go out: when each joined, or when its agent was registered here
    #: if that came later (a dict as an ordered set).
    members: dict[str, None] = field(default_factory=dict)
    spans: dict[str, list[list[int]]] = field(default_factory=dict)  # aid -> [(after seq, through seq)]
    last_seq: int = 0

    def next_seq(self) -> int:
        self.last_seq += 1
        return self.last_seq

    def was_member(self, aid: str, seq: int) -> bool:
        for after, through in self.spans.get(aid, ()):
            if after < seq <= through:
                return True
        return False
