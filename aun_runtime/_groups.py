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
    members: set[str] = field(default_factory=set)
    subscriptions: dict[str, str] = field(default_factory=dict)  # aid -> core subscription id
    spans: dict[str, list[list[int]]] = field(default_factory=dict)  # aid -> [(after seq, through seq)]
    # aid -> the last seq posted before its agent existed here: those copies were dead letters
    floors: dict[str, int] = field(default_factory=dict)
    last_seq: int = 0

    def next_seq(self) -> int:
        self.last_seq += 1
        return self.last_seq

    def was_member(self, aid: str, seq: int) -> bool:
        if seq <= self.floors.get(aid, 0):
            return False
        for after, through in self.spans.get(aid, ()):
            if after < seq <= through:
                return True
        return False
