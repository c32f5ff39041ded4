"""Groups: members and roles, the message log, the event log and each member device's cursors.

A group has two sequences: `message_seq` numbers its messages and `event_seq` its membership and
settings changes. A member's `join_seq` is the message seq when it joined: it reads only what was
posted after, and a member added later never sees earlier talk. The group's `mention_mode` is
snapshotted onto every message when it is posted, so a change is never retroactive. A member who
leaves (or is removed, or whose group is dissolved) is remembered with the group's event seq of
that moment: the last event it may still read.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ._database import Database
from ._inboxes import page_of

__all__ = ["MAX_DEPARTURES", "Group", "GroupStore", "Member"]

_ROLES = ("owner", "admin", "member")
#: Departed members remembered per group (the most recent), each allowed to read the events up to
#: its departure; one who left longer ago than that many others can no longer read even those.
MAX_DEPARTURES = 1024


@dataclass(slots=True)
class Group:
    group_id: str
    name: str
    owner_aid: str
    description: str
    visibility: str
    mention_mode: str
    status: str
    message_seq: int
    event_seq: int
    created_at: float

    def to_wire(self, member_count: int) -> dict[str, Any]:
        return {
            "group_id": self.group_id, "group_aid": self.group_id, "name": self.name, "owner_aid": self.owner_aid,
            "description": self.description, "visibility": self.visibility, "status": self.status,
            "mention_mode": self.mention_mode, "member_count": member_count, "message_seq": self.message_seq,
            "event_seq": self.event_seq, "created_at": int(self.created_at * 1000),
        }


@dataclass(frozen=True, slots=True)
class Member:
    aid: str
    role: str
    join_seq: int

    @property
    def can_manage(self) -> bool:
        return self.role in ("owner", "admin")

    def to_wire(self) -> dict[str, Any]:
        return {"aid": self.aid, "role": self.role, "join_seq": self.join_seq}


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class GroupStore:
    """Groups in the gateway database; group rows are cached in memory and written through."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # A cache of the groups table (one entry per group); dropped on a failed commit.
        self._groups: dict[str, Group] = {}
        db.on_rollback.append(self._groups.clear)

    def get(self, group_id: str) -> Group | None:
        group = self._groups.get(group_id)
        if group is None:
            row = self.db.row(
                "SELECT group_id, name, owner_aid, description, visibility, mention_mode, status, message_seq, "
                "event_seq, created_at FROM groups WHERE group_id = ?", (group_id,)
            )
            if row is None:
                return None
            group = self._groups[group_id] = Group(*row)
        return group

    def create(self, group_id: str, name: str, owner: str, description: str, visibility: str) -> Group:
        group = Group(group_id, name, owner, description, visibility, "disabled", "active", 0, 0, time.time())
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO groups (group_id, name, owner_aid, description, visibility, mention_mode, status, "
                "message_seq, event_seq, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?)",
                (group_id, name, owner, description, visibility, group.mention_mode, group.status, group.created_at),
            )
            self.db.execute(
                "INSERT INTO group_members (group_id, aid, role, join_seq, joined_at) VALUES (?, ?, 'owner', 0, ?)",
                (group_id, owner, group.created_at),
            )
        self._groups[group_id] = group
        return group

    def member(self, group_id: str, aid: str) -> Member | None:
        row = self.db.row(
            "SELECT aid, role, join_seq FROM group_members WHERE group_id = ? AND aid = ?", (group_id, aid)
        )
        return None if row is None else Member(*row)

    def members(self, group_id: str) -> list[Member]:
        rows = self.db.rows(
            "SELECT aid, role, join_seq FROM group_members WHERE group_id = ? ORDER BY joined_at, aid", (group_id,)
        )
        return [Member(*row) for row in rows]

    def member_count(self, group_id: str) -> int:
        return int(self.db.value("SELECT COUNT(*) FROM group_members WHERE group_id = ?", (group_id,)))

    def owned_count(self, aid: str) -> int:
        """Groups `aid` owns that are not dissolved."""
        return int(self.db.value(
            "SELECT COUNT(*) FROM groups WHERE owner_aid = ? AND status != 'dissolved'", (aid,)))

    def add_member(self, group: Group, aid: str, role: str) -> Member:
        if role not in _ROLES[1:]:
            raise ValueError(f"role must be one of {_ROLES[1:]}")
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO group_members (group_id, aid, role, join_seq, joined_at) VALUES (?, ?, ?, ?, ?)",
                (group.group_id, aid, role, group.message_seq, time.time()),
            )
            self.db.execute("DELETE FROM group_departures WHERE group_id = ? AND aid = ?", (group.group_id, aid))
        return Member(aid, role, group.message_seq)

    def remove_member(self, group: Group, aid: str) -> None:
        """Drop `aid` from the group with its devices' cursors (a member who comes back later
        starts again from the seq of that day, like any new member), remembering the group's
        latest event as the last one `aid` may still read: the announcement of its departure."""
        with self.db.atomic():
            self.db.execute("DELETE FROM group_members WHERE group_id = ? AND aid = ?", (group.group_id, aid))
            self.db.execute("DELETE FROM group_cursors WHERE group_id = ? AND aid = ?", (group.group_id, aid))
            self.db.execute("INSERT OR REPLACE INTO group_departures (group_id, aid, event_seq, left_at) "
                            "VALUES (?, ?, ?, ?)", (group.group_id, aid, group.event_seq, time.time()))
            self.db.execute(
                "DELETE FROM group_departures WHERE group_id = ? AND aid NOT IN (SELECT aid FROM group_departures "
                "WHERE group_id = ? ORDER BY left_at DESC LIMIT ?)", (group.group_id, group.group_id, MAX_DEPARTURES),
            )

    def departure(self, group_id: str, aid: str) -> int | None:
        """The last event seq of `group_id` that `aid`, who left it, may read; None if it never left."""
        row = self.db.row(
            "SELECT event_seq FROM group_departures WHERE group_id = ? AND aid = ?", (group_id, aid)
        )
        return None if row is None else int(row[0])

    def set_role(self, group_id: str, aid: str, role: str) -> None:
        if role not in _ROLES:
            raise ValueError(f"role must be one of {_ROLES}")
        with self.db.atomic():
            self.db.execute("UPDATE group_members SET role = ? WHERE group_id = ? AND aid = ?", (role, group_id, aid))

    def set_owner(self, group: Group, new_owner: str) -> None:
        """Make the member `new_owner` the owner; the old owner stays on as an admin."""
        with self.db.atomic():
            self.db.execute("UPDATE group_members SET role = 'admin' WHERE group_id = ? AND aid = ?",
                            (group.group_id, group.owner_aid))
            self.db.execute("UPDATE group_members SET role = 'owner' WHERE group_id = ? AND aid = ?",
                            (group.group_id, new_owner))
            self.db.execute("UPDATE groups SET owner_aid = ? WHERE group_id = ?", (new_owner, group.group_id))
        group.owner_aid = new_owner

    def dissolve(self, group: Group) -> None:
        """Mark the group dissolved and remove every member (each may still read the events up to
        the dissolution). The group's id stays taken and its message log stays, unreadable, so no
        later group inherits either."""
        for member in self.members(group.group_id):
            self.remove_member(group, member.aid)
        with self.db.atomic():
            self.db.execute("UPDATE groups SET status = 'dissolved' WHERE group_id = ?", (group.group_id,))
        group.status = "dissolved"

    def groups_of(self, aid: str) -> list[tuple[Group, Member]]:
        rows = self.db.rows(
            "SELECT group_id, aid, role, join_seq FROM group_members WHERE aid = ? ORDER BY group_id", (aid,)
        )
        found = []
        for group_id, member_aid, role, join_seq in rows:
            group = self.get(group_id)
            if group is not None:
                found.append((group, Member(member_aid, role, join_seq)))
        return found

    def set_mention_mode(self, group: Group, mode: str) -> None:
        with self.db.atomic():
            self.db.execute("UPDATE groups SET mention_mode = ? WHERE group_id = ?", (mode, group.group_id))
        group.mention_mode = mode

    # -- messages ------------------------------------------------------------------------------

    def find_message(self, group_id: str, sender: str, message_id: str) -> dict[str, Any] | None:
        row = self.db.row(
            "SELECT body FROM group_messages WHERE group_id = ? AND sender = ? AND message_id = ?",
            (group_id, sender, message_id),
        )
        return None if row is None else dict(json.loads(row[0]))

    def message_seq(self, group_id: str, message_id: str) -> int | None:
        """The seq of the group's message `message_id` (from any sender), or None."""
        row = self.db.row(
            "SELECT MIN(seq) FROM group_messages WHERE group_id = ? AND message_id = ?", (group_id, message_id)
        )
        return None if row is None or row[0] is None else int(row[0])

    def append_message(self, group: Group, sender: str, message_id: str, row: dict[str, Any]) -> dict[str, Any]:
        seq = group.message_seq + 1
        row = {**row, "seq": seq}
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO group_messages (group_id, seq, sender, message_id, body) VALUES (?, ?, ?, ?, ?)",
                (group.group_id, seq, sender, message_id, _dump(row)),
            )
            self.db.execute("UPDATE groups SET message_seq = ? WHERE group_id = ?", (seq, group.group_id))
        group.message_seq = seq
        return row

    def messages(
        self, group_id: str, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Messages after `after_seq`, bounded by count and bytes; and whether more remain."""
        bodies = self.db.rows(
            "SELECT body FROM group_messages WHERE group_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (group_id, after_seq, limit + 1),
        )
        return page_of(bodies, limit, max_bytes)

    def tail(self, group_id: str, after_seq: int, upper_seq: int, max_bytes: int) -> list[dict[str, Any]]:
        """The messages after `after_seq` up to `upper_seq`, the latest first kept: as many of
        the newest as fit in `max_bytes` (always at least one), returned oldest first."""
        bodies = self.db.rows(
            "SELECT body FROM group_messages WHERE group_id = ? AND seq > ? AND seq <= ? ORDER BY seq DESC",
            (group_id, after_seq, upper_seq),
        )
        kept: list[dict[str, Any]] = []
        size = 0
        for (body,) in bodies:
            size += len(body)
            if kept and size > max_bytes:
                break
            kept.append(json.loads(body))
        kept.reverse()
        return kept

    # -- events --------------------------------------------------------------------------------

    def append_event(self, group: Group, event: dict[str, Any]) -> dict[str, Any]:
        event_seq = group.event_seq + 1
        event = {**event, "group_id": group.group_id, "group_aid": group.group_id, "event_seq": event_seq,
                 "created_at": int(time.time() * 1000)}
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO group_events (group_id, event_seq, body) VALUES (?, ?, ?)",
                (group.group_id, event_seq, _dump(event)),
            )
            self.db.execute("UPDATE groups SET event_seq = ? WHERE group_id = ?", (event_seq, group.group_id))
        group.event_seq = event_seq
        return event

    def events(self, group_id: str, after_event_seq: int, limit: int, upto: int | None = None) -> list[dict[str, Any]]:
        """Up to `limit + 1` events after `after_event_seq` (and at most `upto`, if given)."""
        rows = self.db.rows(
            "SELECT body FROM group_events WHERE group_id = ? AND event_seq > ? AND event_seq <= ? "
            "ORDER BY event_seq LIMIT ?", (group_id, after_event_seq, upto if upto is not None else 2**62, limit + 1),
        )
        return [json.loads(body) for (body,) in rows]

    # -- cursors -------------------------------------------------------------------------------

    def cursor(self, group_id: str, aid: str, device_id: str, slot_id: str) -> tuple[int, int]:
        """(message ack seq, event ack seq) of one member device."""
        row = self.db.row(
            "SELECT ack_seq, event_ack_seq FROM group_cursors WHERE group_id = ? AND aid = ? AND device_id = ? "
            "AND slot_id = ?", (group_id, aid, device_id, slot_id),
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def message_acks(self, group_id: str) -> dict[tuple[str, str, str], int]:
        """Every member device's message ack seq, by (aid, device_id, slot_id); one read for a
        whole fan-out rather than one per device."""
        rows = self.db.rows(
            "SELECT aid, device_id, slot_id, ack_seq FROM group_cursors WHERE group_id = ?", (group_id,)
        )
        return {(str(aid), str(device), str(slot)): int(ack) for aid, device, slot, ack in rows}

    def set_cursor(self, group_id: str, aid: str, device_id: str, slot_id: str, ack: int, event_ack: int) -> None:
        with self.db.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO group_cursors (group_id, aid, device_id, slot_id, ack_seq, event_ack_seq) "
                "VALUES (?, ?, ?, ?, ?, ?)", (group_id, aid, device_id, slot_id, ack, event_ack),
            )
