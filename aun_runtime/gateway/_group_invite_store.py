"""Pending group invitations in the gateway database, bounded per group and per invited AID.

Only pending invitations are rows: accepting, rejecting, revoking or expiring one deletes it, so
the table holds at most `MAX_PENDING_INVITES_PER_GROUP` rows per group and
`MAX_PENDING_INVITES_PER_AID` per invited AID. An expired row is treated as gone wherever it
is read and deleted the next time its group or its invitee is written to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ._database import Database

__all__ = ["INVITE_TTL_SECONDS", "MAX_PENDING_INVITES_PER_AID", "MAX_PENDING_INVITES_PER_GROUP", "GroupInviteStore",
           "Invite"]

#: How long an invitation waits for its answer.
INVITE_TTL_SECONDS = 7 * 24 * 3600
#: Pending invitations one group may have out at once (from all its inviters together).
MAX_PENDING_INVITES_PER_GROUP = 256
#: Pending invitations one AID may have received at once (from all groups together).
MAX_PENDING_INVITES_PER_AID = 64

_COLUMNS = "invite_id, group_id, invitee_aid, inviter_aid, member_type, created_at, expires_at"


@dataclass(frozen=True, slots=True)
class Invite:
    """One pending invitation of `invitee_aid` into `group_id` by `inviter_aid`."""

    invite_id: str
    group_id: str
    invitee_aid: str
    inviter_aid: str
    member_type: str
    created_at: float
    expires_at: float

    def to_wire(self) -> dict[str, Any]:
        return {"invite_id": self.invite_id, "group_id": self.group_id, "group_aid": self.group_id,
                "invitee_aid": self.invitee_aid, "inviter_aid": self.inviter_aid, "member_type": self.member_type,
                "status": "pending", "created_at": int(self.created_at * 1000),
                "expires_at": int(self.expires_at * 1000)}


class GroupInviteStore:
    """Reads and writes `group_invites` (the store holds no state of its own)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _rows(self, where: str, args: tuple[Any, ...]) -> list[Invite]:
        rows = self.db.rows(
            f"SELECT {_COLUMNS} FROM group_invites WHERE {where} AND expires_at > ? ORDER BY created_at, invite_id",
            (*args, time.time()),
        )
        return [Invite(*row) for row in rows]

    def get(self, invite_id: str) -> Invite | None:
        found = self._rows("invite_id = ?", (invite_id,))
        return found[0] if found else None

    def of_pair(self, group_id: str, invitee_aid: str) -> list[Invite]:
        """The pending invitations of `invitee_aid` into `group_id`, oldest first."""
        return self._rows("group_id = ? AND invitee_aid = ?", (group_id, invitee_aid))

    def of_invitee(self, invitee_aid: str) -> list[Invite]:
        return self._rows("invitee_aid = ?", (invitee_aid,))

    def count_for_group(self, group_id: str) -> int:
        return len(self._rows("group_id = ?", (group_id,)))

    def add(self, invite: Invite) -> None:
        now = time.time()
        with self.db.atomic():
            # Expired rows of this group and this invitee go first, so they never count to a bound.
            self.db.execute("DELETE FROM group_invites WHERE (group_id = ? OR invitee_aid = ?) AND expires_at <= ?",
                            (invite.group_id, invite.invitee_aid, now))
            self.db.execute(f"INSERT INTO group_invites ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (invite.invite_id, invite.group_id, invite.invitee_aid, invite.inviter_aid,
                             invite.member_type, invite.created_at, invite.expires_at))

    def end(self, invite_id: str) -> None:
        with self.db.atomic():
            self.db.execute("DELETE FROM group_invites WHERE invite_id = ?", (invite_id,))

    def end_pair(self, group_id: str, invitee_aid: str) -> None:
        """End every invitation of `invitee_aid` into `group_id` (accepted or rejected together)."""
        with self.db.atomic():
            self.db.execute("DELETE FROM group_invites WHERE group_id = ? AND invitee_aid = ?", (group_id, invitee_aid))

    def drop_group(self, group_id: str) -> list[str]:
        """End every invitation into `group_id`; returns the AIDs that had one."""
        invitees = sorted({invite.invitee_aid for invite in self._rows("group_id = ?", (group_id,))})
        with self.db.atomic():
            self.db.execute("DELETE FROM group_invites WHERE group_id = ?", (group_id,))
        return invitees
