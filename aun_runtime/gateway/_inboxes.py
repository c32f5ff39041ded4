"""Direct-message inboxes: one sequence per receiver, one consumption cursor per (device, slot, sender).

A receiver's inbox numbers every message it receives, from all senders, 1, 2, 3...; each row also
records `prev_peer_seq`, the seq of the previous message from the same sender, so a client can
tell from a single push whether it missed anything from that sender. Cursors are kept per receiving
device and slot and per sender (the client's "peer" cursor scope): each device consumes and
acknowledges every sender's stream on its own, and an acknowledgement never moves backwards.

A receiver served in `queue` mode may also hold *re-issued copies* (see `_queue`): a message
whose queue member left unacknowledged is appended again, same `message_id` and payload, under a
new seq, for the member that takes it over. A copy is queue bookkeeping, not a new message: what
this store shows a fanout connection (pulls, the peer directory, the `prev_peer_seq` chain) leaves
the copies out, so a fanout reader of a former queue AID gets each message once, at the seq it was
sent with. A copy's idempotency key starts with a space, which no sender's `message_id` has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._database import Database
from ._frames import dumps

__all__ = ["InboxStore", "PeerEntry", "StoredMessage", "page_of"]

# The rows that are messages as sent, not re-issued copies (their key starts with a space).
_SENT = "substr(message_id, 1, 1) <> ' '"


def page_of(bodies: list[tuple[str]], limit: int, max_bytes: int | None) -> tuple[list[dict[str, Any]], bool]:
    """Decode stored JSON rows into a page bounded by count and size; True if rows were left out."""
    rows: list[dict[str, Any]] = []
    size = 0
    for (body,) in bodies[:limit]:
        size += len(body)
        if rows and max_bytes is not None and size > max_bytes:
            return rows, True
        rows.append(json.loads(body))
    return rows, len(bodies) > limit


@dataclass(frozen=True, slots=True)
class StoredMessage:
    receiver: str
    seq: int
    row: dict[str, Any]

    def push_params(self, device_id: str, slot_id: str, prev_peer_seq: int | None = None) -> dict[str, Any]:
        """The params of an `event/message.received` push of this message to one connection, with
        the `prev_peer_seq` of that connection's chain (the inbox's own when None)."""
        row = self.row
        if prev_peer_seq is not None and prev_peer_seq != row["prev_peer_seq"]:
            row = {**row, "prev_peer_seq": prev_peer_seq}  # the client checks the two copies agree
        return {
            "from_aid": row["from_aid"], "sender_aid": row["sender_aid"], "to": row["to"], "seq": self.seq,
            "message_id": row["message_id"], "prev_peer_seq": row["prev_peer_seq"],
            "sender_device_id": row["sender_device_id"], "target_device_id": device_id,
            "target_slot_id": slot_id, "inline_message": row,
        }


@dataclass(frozen=True, slots=True)
class PeerEntry:
    """One sender in a receiver's peer directory."""

    sender_aid: str
    head_seq: int
    server_ack_seq: int
    next_pending_seq: int | None

    def to_wire(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "sender_aid": self.sender_aid, "head_seq": self.head_seq, "server_ack_seq": self.server_ack_seq,
        }
        if self.next_pending_seq is not None:
            entry["next_pending_seq"] = self.next_pending_seq
        return entry


class InboxStore:
    """Inbox rows and cursors in the gateway database.

    The inbox head and each sender's last seq are derived from the rows themselves (the primary key
    and the per-peer index answer them in one probe) and then kept in memory, so appending a message
    writes one row and nothing else.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        # Caches of what the rows say (so as large as the data, no larger); dropped on a failed commit.
        self._heads: dict[str, int] = {}
        self._peer_heads: dict[tuple[str, str], int] = {}
        db.on_rollback.append(self.forget_cached_heads)

    def head(self, receiver: str) -> int:
        """The highest seq in `receiver`'s inbox (0 when empty)."""
        head = self._heads.get(receiver)
        if head is None:
            head = self._heads[receiver] = int(self.db.value("SELECT MAX(seq) FROM inbox WHERE receiver = ?", (receiver,)) or 0)
        return head

    def peer_head(self, receiver: str, sender: str) -> int:
        """The seq of the last message from `sender` in `receiver`'s inbox, copies left out (0 if none)."""
        key = (receiver, sender)
        head = self._peer_heads.get(key)
        if head is None:
            # Backwards through the per-peer index: past the copies at the head only, not the whole stream.
            row = self.db.row(
                f"SELECT seq FROM inbox INDEXED BY inbox_by_peer WHERE receiver = ? AND sender = ? AND {_SENT} "
                "ORDER BY seq DESC LIMIT 1", (receiver, sender),
            )
            head = self._peer_heads[key] = 0 if row is None else int(row[0])
        return head

    def find_sent(self, sender: str, message_id: str) -> StoredMessage | None:
        """The message `sender` already sent under `message_id`, if any (idempotent retries)."""
        row = self.db.row(
            "SELECT receiver, seq, body FROM inbox WHERE sender = ? AND message_id = ?", (sender, message_id)
        )
        return None if row is None else StoredMessage(row[0], int(row[1]), json.loads(row[2]))

    def append(self, receiver: str, sender: str, message_id: str, row: dict[str, Any]) -> StoredMessage:
        """Give `row` the next seq of `receiver`'s inbox and store it (in the open transaction)."""
        stored = self._insert(receiver, sender, message_id, row)
        self._peer_heads[(receiver, sender)] = stored.seq
        return stored

    def append_copy(self, receiver: str, sender: str, from_seq: int, row: dict[str, Any]) -> StoredMessage:
        """Store a re-issued copy of the message at `from_seq` at the inbox head (in the open
        transaction). Its key is not the sender's, so a retried send still finds the original; its
        `prev_peer_seq` is the fanout chain's (a queue member is told its own), and it does not
        become the head of that chain."""
        return self._insert(receiver, sender, f" moved {from_seq} {row['message_id']}", row)

    def _insert(self, receiver: str, sender: str, key: str, row: dict[str, Any]) -> StoredMessage:
        seq = self.head(receiver) + 1
        row = {**row, "seq": seq, "prev_peer_seq": self.peer_head(receiver, sender)}
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO inbox (receiver, seq, sender, message_id, body) VALUES (?, ?, ?, ?, ?)",
                (receiver, seq, sender, key, dumps(row)),
            )
        self._heads[receiver] = seq
        return StoredMessage(receiver, seq, row)

    def forget_cached_heads(self) -> None:
        """Drop the cached heads (after a failed commit rolled rows back)."""
        self._heads.clear()
        self._peer_heads.clear()

    def pull(
        self, receiver: str, sender: str, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Rows from `sender` with seq > `after_seq`, copies left out: at most `limit`, and no
        more once they reach `max_bytes` (at least one). Returns them and whether more remain."""
        bodies = self.db.rows(
            f"SELECT body FROM inbox WHERE receiver = ? AND sender = ? AND seq > ? AND {_SENT} ORDER BY seq LIMIT ?",
            (receiver, sender, after_seq, limit + 1),
        )
        return page_of(bodies, limit, max_bytes)

    def ack_seq(self, receiver: str, device_id: str, slot_id: str, sender: str) -> int:
        row = self.db.row(
            "SELECT ack_seq FROM peer_cursors WHERE receiver = ? AND device_id = ? AND slot_id = ? AND sender = ?",
            (receiver, device_id, slot_id, sender),
        )
        return 0 if row is None else int(row[0])

    def acknowledge(self, receiver: str, device_id: str, slot_id: str, sender: str, up_to_seq: int) -> int:
        """Move the cursor to `up_to_seq` (clamped to the inbox head; never backwards). Returns it."""
        current = self.ack_seq(receiver, device_id, slot_id, sender)
        target = max(current, min(up_to_seq, self.head(receiver)))
        if target != current:
            with self.db.atomic():
                self.db.execute(
                    "INSERT INTO peer_cursors (receiver, device_id, slot_id, sender, ack_seq) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT DO UPDATE SET ack_seq = excluded.ack_seq",
                    (receiver, device_id, slot_id, sender, target),
                )
        return target

    def peers(
        self, receiver: str, device_id: str, slot_id: str, *, pending_only: bool, after_sender: str = "",
        limit: int | None = None,
    ) -> list[PeerEntry]:
        """The senders of `receiver`'s inbox, in sender order, with this device's cursor for each
        (heads and next pending messages of the messages as sent, copies left out)."""
        senders = self.db.rows(
            "SELECT DISTINCT sender FROM inbox WHERE receiver = ? AND sender > ? ORDER BY sender",
            (receiver, after_sender),
        )
        heads = [(sender, head) for (sender,) in senders if (head := self.peer_head(receiver, sender))]
        acks: dict[str, int] = dict(self.db.rows(
            "SELECT sender, ack_seq FROM peer_cursors WHERE receiver = ? AND device_id = ? AND slot_id = ?",
            (receiver, device_id, slot_id),
        ))
        entries = []
        for sender, head in heads:
            ack = int(acks.get(sender, 0))
            if pending_only and head <= ack:
                continue
            # The first match in index order (MIN() would read every pending row to test its key).
            next_row = self.db.row(
                f"SELECT seq FROM inbox INDEXED BY inbox_by_peer WHERE receiver = ? AND sender = ? AND seq > ? "
                f"AND {_SENT} ORDER BY seq LIMIT 1", (receiver, sender, ack),
            )
            entries.append(PeerEntry(sender, int(head), ack, None if next_row is None else int(next_row[0])))
            if limit is not None and len(entries) >= limit:
                break
        return entries
