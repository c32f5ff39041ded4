"""Queue delivery: each direct message of an AID in `queue` mode goes to one of its connections.

The connections of one AID that declared `delivery_mode.mode = "queue"` (`._delivery_mode`)
and are long connections are its *members*. A member is known by its `(device_id, slot_id)`,
the scope of its cursors, so two members of one AID must differ there (`auth.connect` answers
`slot_conflict` otherwise); a runtime that restarts with the same identity directory comes back
as the same member.

**Assignment.** Every message is stored in the receiver's inbox exactly as in fanout mode (durable
before the sender is answered; the real AUN keeps queue messages in memory only, this gateway
loses none). When it is stored while members are online, the router picks one (round robin, or the
sender's member under `sender_affinity`) and records the *assignment* `(receiver, seq) -> member`
in the same transaction, then pushes the message to that member only. An end-to-end encrypted
message is given only to a member whose device it is wrapped for (the envelope's `recipients`
routing field, see `readers`), while one is online; a message not wrapped for an online
member that could be is refused before it is stored (`QueueRouter.unwrapped_members`), so the
sender's client wraps it again for every member. A message stored while no member is online is
unassigned; the first member that pulls it claims it.

**One chain per member.** The AUN client checks each pushed message against the sender's stream it
has seen: it takes the push as it is only when `prev_peer_seq` is at most what it has consumed
from that sender, else it pulls. A member's *view* of a sender is the messages assigned to it plus
the unassigned ones; everything a member is told is computed in its view: the `prev_peer_seq` of
a push is the previous message of that sender in the member's view, a pull returns only messages of
its view (its coverage proof covers its view up to the inbox head), and `message.peers` reports
the heads and next pending messages of its view. A member's cursor per sender, cumulative as
always, may therefore pass messages of the other members: they are not its own. A view only loses
messages (claimed by another member, or moved away) and only gains them at the head, so a chain
told to a member never misses a message it will later be asked to have.

**Members that leave.** An assignment is *open* until its member acknowledges it. When a member
goes (its socket ends: a clean close, a crash, a kill, a slow consumer closed), its open messages
go to the other members. They cannot keep their seq: the taker's cursor for that sender may
already be past it, and the client would take them for consumed. So each is *re-issued*: a copy
(same `message_id`, same payload, still end-to-end encrypted for every device of the AID) is
appended to the inbox under a new seq, at the head, assigned to the taker and open; the original
is marked moved and leaves every view, so the member that left does not get it again if it comes
back. A copy is the same message, not a new one: a fanout connection of the AID never sees copies
(see `._inboxes`), only the message as it was sent. The newest copy of each sender is pushed
to the taker, whose chain then shows the rest and makes its client pull them. A member that leaves while no other is online keeps its messages
(it gets them when it returns); a member that connects takes over the open messages of every
member that is not online. Delivery stays at least once: a message its member handled but had not
yet acknowledged when it went is delivered again, to the taker, with the same `message_id`.

**After a restart.** Members reconnect on their own schedules, and the first one back must not
take the others' work. For `queue_rejoin_grace` after the start, a member of an AID that had open
messages then and that has not connected since is *expected back*: no take-over touches its open
messages. Under `sender_affinity` the sender's member is read from the inbox during the grace
(what memory held went with the restart), and a sender's new message whose previous one is open on
a member expected back is assigned to that member too, unpushed: the sender's messages stay on one
member, in order. At the end of the grace (`QueueRouter.end_rejoin_grace`) the open messages
of the members still not back are re-issued to the online ones, in seq order. The same rule keeps a
sender's order during any take-over: a new message whose previous one is still open on a member that
left waits on it and is moved after it, rather than being pushed ahead of the copies. The grace
follows the AUN client, which reconnects 16 to 32 s after the server closed its connection.

**Bounds.** Members per AID are bounded by `max_connections_per_aid`. Sender affinities are kept
for at most `queue_affinity_senders` senders per AID (the least recently used is forgotten and
gets a member by turn again). A take-over moves at most `TAKEOVER_BATCH` messages per event
loop turn and pushes one copy per sender and batch, so a member that left with a large backlog
neither stalls the gateway nor floods the taker's outbound queue. What the grace keeps in memory
(the AIDs that had open messages at the start, the members back since) is dropped when it ends.

Group messages are not affected: AUN group messages are always fanout, so each member of a group
that is an AID in queue mode gets every group message on every connection, as in fanout mode.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from typing import Any

from ._database import Database
from ._delivery_mode import DeliveryMode
from ._errors import ErrorCode, RPCError
from ._events import GatewayEvents
from ._frames import notification_frame
from ._inboxes import InboxStore, PeerEntry, StoredMessage
from ._session import Session

__all__ = ["TAKEOVER_BATCH", "QueueRouter", "readers"]

log = logging.getLogger("aun_runtime.gateway")

#: Messages one take-over step moves before it lets the event loop run other work.
TAKEOVER_BATCH = 200

Member = tuple[str, str]  # (device_id, slot_id)

# A message is in a member's view when it is unassigned, or assigned to that member and not moved.
_JOIN = "FROM inbox i INDEXED BY inbox_by_peer LEFT JOIN queue_assignments a ON a.receiver = i.receiver AND a.seq = i.seq"
_INSERT = ("INSERT INTO queue_assignments (receiver, seq, sender, device_id, slot_id, moved_to, open) "
           "VALUES (?, ?, ?, ?, ?, NULL, 1)")
_VIEW = "(a.seq IS NULL OR (a.device_id = ? AND a.slot_id = ? AND a.moved_to IS NULL))"


def readers(row: dict[str, Any]) -> set[str] | None:
    """The receiver's devices an end-to-end encrypted message is wrapped for (the envelope's
    `recipients` routing field: `[aid, device_id, ...]` rows), or None for a plaintext one."""
    payload = (row.get("legacy_v1") or {}).get("payload")
    recipients = payload.get("recipients") if isinstance(payload, dict) else None
    if not isinstance(recipients, list):
        return None
    return {r[1] for r in recipients if isinstance(r, list) and len(r) > 1 and r[0] == row.get("to") and isinstance(r[1], str)}


def _member(session: Session) -> Member:
    return session.device_id, session.slot_id


class QueueRouter:
    """The delivery modes of the connected AIDs and the queue of those in `queue` mode."""

    def __init__(self, db: Database, inboxes: InboxStore, events: GatewayEvents, affinity_senders: int,
                 rejoin_grace: float = 0.0) -> None:
        self.db = db
        self.inboxes = inboxes
        self.events = events
        self.affinity_senders = affinity_senders
        # Until then, a member of one of these AIDs (with open messages at the start) that has not
        # connected since is expected back (it was connected before a restart): its messages stay its own.
        self._grace_ends = time.monotonic() + rejoin_grace if rejoin_grace > 0 else 0.0
        self._restarted: set[str] = set()
        if self._grace_ends:  # through the partial index of open assignments: they are few
            self._restarted = {aid for (aid,) in db.rows(
                "SELECT DISTINCT receiver FROM queue_assignments INDEXED BY queue_open WHERE open = 1")}
        self._back: set[tuple[str, str, str]] = set()  # (aid, device, slot) connected during the grace
        self._grace_timer: asyncio.TimerHandle | None = None
        # Take-overs under way per AID: meanwhile a sender's new message joins its open ones (see _pick).
        self._moving: dict[str, int] = {}
        # Every authenticated connection by AID, in the order they connected (what the mode check reads).
        self._connections: dict[str, dict[Session, None]] = {}
        self._turns: dict[str, int] = {}
        # sender -> (member, last time it was routed there), per AID, least recently used first.
        self._affinity: dict[str, OrderedDict[str, tuple[Member, float]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- connections ---------------------------------------------------------------------------

    def mode_of(self, aid: str) -> DeliveryMode | None:
        """The delivery mode `aid`'s online connections declared (None while none is online)."""
        sessions = self._connections.get(aid)
        return next(iter(sessions)).delivery_mode if sessions else None

    def members(self, aid: str) -> list[Session]:
        """`aid`'s queue members that take pushes, in the order they connected."""
        return [s for s in self._connections.get(aid, ()) if s.delivery_mode.queue and s.kind == "long" and s.accepting]

    def check(self, aid: str, mode: DeliveryMode, device_id: str, slot_id: str, *, long: bool) -> None:
        """Refuse an `auth.connect` whose mode differs from the AID's online connections', or a
        second queue member on the same device and slot (they would share one set of cursors).

        Raises:
            RPCError: `ErrorCode.CONNECT_CONFLICT` with `data.reason` `delivery_mode_conflict`
                or `slot_conflict` (retryable: it ends when the other connections go).
        """
        online = self.mode_of(aid)
        if online is not None and online != mode:
            raise RPCError(
                ErrorCode.CONNECT_CONFLICT,
                f"delivery_mode_conflict: {aid}'s online connections use delivery_mode {online.to_wire()}, "
                f"not {mode.to_wire()}; every connection of one AID must declare the same",
                reason="delivery_mode_conflict", field="delivery_mode", online=online.to_wire(),
                declared=mode.to_wire(), retryable=True,
            )
        if mode.queue and long and any(_member(s) == (device_id, slot_id) for s in self.members(aid)):
            raise RPCError(
                ErrorCode.CONNECT_CONFLICT,
                f"slot_conflict: a queue member of {aid} is already online on device {device_id!r}, slot "
                f"{slot_id!r}; give each member its own device or slot",
                reason="slot_conflict", field="client.slot_id", retryable=True,
            )

    def connected(self, session: Session) -> bool:
        """Count an authenticated connection; a queue member takes over the open messages of the
        members that are not online. Returns True if that wrote something (to commit)."""
        assert session.aid is not None
        self._connections.setdefault(session.aid, {})[session] = None
        if not (session.delivery_mode.queue and session.kind == "long"):
            return False
        if self._in_grace(session.aid):
            self._back.add((session.aid, *_member(session)))
            if self._grace_timer is None:
                delay = max(0.0, self._grace_ends - time.monotonic())
                self._grace_timer = asyncio.get_running_loop().call_later(delay, self.end_rejoin_grace)
        # The first batch is moved before auth.connect is answered, so the member's first
        # message.peers already lists it; a longer backlog follows in the background, pushed.
        moved, more = self._take_over(session.aid, None)
        if more:
            self._spawn_take_over([session.aid], None)
        return bool(moved)

    def detached(self, session: Session) -> None:
        """Forget a connection whose socket has ended; a queue member's open messages go to the others."""
        aid = session.aid
        if aid is None or session not in self._connections.get(aid, {}):
            return
        sessions = self._connections[aid]
        del sessions[session]
        if not sessions:
            del self._connections[aid]
            self._turns.pop(aid, None)
            self._affinity.pop(aid, None)
        if session.delivery_mode.queue and session.kind == "long" and self.members(aid):
            self._spawn_take_over([aid], _member(session))

    def _spawn_take_over(self, aids: list[str], owner: Member | None) -> None:
        """Move the open messages of `owner` (None: of every member not online and not expected
        back) of each AID in turn, in the background; each AID counts as moving from now on."""
        for aid in aids:
            self._moving[aid] = self._moving.get(aid, 0) + 1
        task = asyncio.get_running_loop().create_task(self._take_over_each(aids, owner))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- after a restart -----------------------------------------------------------------------

    def _in_grace(self, aid: str) -> bool:
        """Whether `aid` had open messages when the gateway started and the grace is not over."""
        return aid in self._restarted and time.monotonic() < self._grace_ends

    def _awaited(self, aid: str, owner: Member) -> bool:
        """Whether `owner` is a member expected back after a restart (its messages wait for it)."""
        return self._in_grace(aid) and (aid, *owner) not in self._back

    def end_rejoin_grace(self) -> None:
        """End the grace period after a start (`queue_rejoin_grace`; its timer calls this): the
        open messages of members not back by now go to the members online, in order."""
        if self._grace_timer is not None:
            self._grace_timer.cancel()
            self._grace_timer = None
        if not self._grace_ends:
            return
        self._grace_ends = 0.0
        self._back.clear()
        aids = [aid for aid in self._restarted if self.members(aid)]
        self._restarted.clear()
        if aids:
            self._spawn_take_over(aids, None)

    def close(self) -> None:
        """Stop the grace timer (the gateway is stopping)."""
        if self._grace_timer is not None:
            self._grace_timer.cancel()
            self._grace_timer = None

    # -- routing -------------------------------------------------------------------------------

    def unwrapped_members(self, receiver: str, payload: dict[str, Any]) -> list[str]:
        """The devices of `receiver`'s online queue members an end-to-end encrypted `payload` is
        not wrapped for (empty for a plaintext payload, an AID-scoped wrap or a fanout receiver).

        A sender's client keeps the receiver's devices from `message.v2.bootstrap` for an hour; a
        member that joined since then is missing from its envelopes, and every message wrapped
        without it would go to the members that can read it, never to the newcomer. So `message.send`
        refuses such a message (while the newcomer has published a prekey, so that a fresh bootstrap
        does list it): the AUN client answers that refusal by fetching the bootstrap again and sending
        the message once more, wrapped for every member.
        """
        mode = self.mode_of(receiver)
        if mode is None or not mode.queue:
            return []
        wrapped = readers({"to": receiver, "legacy_v1": {"payload": payload}})
        if wrapped is None or "" in wrapped:  # plaintext, or wrapped for the AID, not per device
            return []
        return sorted({m.device_id for m in self.members(receiver)} - wrapped)

    def route(self, stored: StoredMessage) -> tuple[bool, Session | None]:
        """Assign a message just stored (in the open transaction) to one member of its receiver, if
        the receiver is served in queue mode and a member is online. Returns whether it was assigned
        and the member to push it to once committed: None when it waits, with the sender's other
        open messages, for a member that is not online (see `_pick`)."""
        mode = self.mode_of(stored.receiver)
        if mode is None or not mode.queue:
            return False, None
        sender = stored.row["sender_aid"]
        member = self._pick(stored.receiver, sender, mode, readers(stored.row), new_seq=stored.seq)
        if member is None:
            return False, None
        owner = member if isinstance(member, tuple) else _member(member)
        # One statement, in the transaction the append just opened (no savepoint of its own:
        # this is on every queue send's path, and a failed INSERT changes nothing anyway).
        self.db.execute(_INSERT, (stored.receiver, stored.seq, sender, *owner))
        if isinstance(member, tuple):
            self.events.emit("message.assigned", receiver=stored.receiver, sender=sender, seq=stored.seq,
                             message_id=stored.row["message_id"], connection_id=None, device_id=owner[0], how="held")
            return True, None
        self._assigned(stored, member, "push")
        return True, member

    def _pick(self, aid: str, sender: str, mode: DeliveryMode, devices: set[str] | None,
              new_seq: int | None = None) -> Session | Member | None:
        """The member a message of `sender` goes to (None: no member online). For a new message
        (`new_seq`) under `sender_affinity` while members are expected back or messages are being
        moved, the owner of the sender's previous message, even one not online: the message waits
        with the sender's others (a `Member`, not a `Session`), so they stay on one member in order
        and a take-over moves them all, in seq order."""
        members = self.members(aid)
        if devices is not None:  # only members that can decrypt it, while there is one
            members = [m for m in members if m.device_id in devices] or members
        if not members:
            return None
        if mode.affinity and new_seq is not None and (self._in_grace(aid) or self._moving.get(aid)):
            waiting = self._waiting_owner(aid, sender)
            if waiting is not None:  # the sender's earlier messages wait for it, or to be moved
                return waiting
            # The sender's member as the inbox knows it: what memory knew went with a restart.
            owner = self._last_owner(aid, sender, new_seq)
            chosen = next((m for m in members if _member(m) == owner), None)
            if chosen is not None and owner is not None:
                self._remember(aid, sender, owner)
                return chosen
        if mode.affinity:
            known = self._affinity.get(aid)
            kept = None if known is None else known.get(sender)
            idle_ms = 0.0 if kept is None else (time.monotonic() - kept[1]) * 1000
            if kept is not None and (mode.affinity_ttl_ms == 0 or idle_ms < mode.affinity_ttl_ms):
                chosen = next((m for m in members if _member(m) == kept[0]), None)
                if chosen is not None:
                    self._remember(aid, sender, kept[0])
                    return chosen
        turn = self._turns.get(aid, 0)
        chosen = members[turn % len(members)]
        self._turns[aid] = turn + 1
        if mode.affinity:
            self._remember(aid, sender, _member(chosen))
        return chosen

    def _remember(self, aid: str, sender: str, member: Member) -> None:
        affinities = self._affinity.setdefault(aid, OrderedDict())
        affinities[sender] = (member, time.monotonic())
        affinities.move_to_end(sender)
        while len(affinities) > self.affinity_senders:
            affinities.popitem(last=False)

    def _last_owner(self, aid: str, sender: str, before_seq: int) -> Member | None:
        """The member `sender`'s newest message before `before_seq` is assigned to (None if that
        message is unassigned or was moved)."""
        row = self.db.row(
            f"SELECT a.device_id, a.slot_id, a.moved_to {_JOIN} WHERE i.receiver = ? AND i.sender = ? "
            "AND i.seq < ? ORDER BY i.seq DESC LIMIT 1", (aid, sender, before_seq),
        )
        if row is None or row[0] is None or row[2] is not None:
            return None
        return str(row[0]), str(row[1])

    def _waiting_owner(self, aid: str, sender: str) -> Member | None:
        """A member not online that still holds open messages of `sender` which wait for it (it is
        expected back) or are about to be moved (a take-over is under way), if there is one."""
        online = {_member(m) for m in self.members(aid)}
        # Through the index of open assignments: open ones are few.
        for device_id, slot_id in self.db.rows(
            "SELECT device_id, slot_id FROM queue_assignments INDEXED BY queue_open WHERE receiver = ? "
            "AND sender = ? AND open = 1 GROUP BY device_id, slot_id ORDER BY MAX(seq) DESC", (aid, sender),
        ):
            owner = (str(device_id), str(slot_id))
            if owner not in online and (self._awaited(aid, owner) or self._moving.get(aid)):
                return owner
        return None

    def push(self, stored: StoredMessage, member: Session) -> bool:
        """Push `stored` to the member it is assigned to, in that member's chain."""
        prev = self._prev_in_view(stored.receiver, stored.row["sender_aid"], _member(member), stored.seq)
        params = stored.push_params(member.device_id, member.slot_id, prev)
        return member.push(notification_frame("event/message.received", params))

    def _assign(self, receiver: str, seq: int, sender: str, member: Member) -> None:
        with self.db.atomic():
            self.db.execute(_INSERT, (receiver, seq, sender, *member))

    def _assigned(self, stored: StoredMessage, member: Session, how: str) -> None:
        self.events.emit(
            "message.assigned", receiver=stored.receiver, sender=stored.row["sender_aid"], seq=stored.seq,
            message_id=stored.row["message_id"], connection_id=member.id, device_id=member.device_id, how=how,
        )

    def acknowledged(self, session: Session, sender: str, up_to_seq: int) -> None:
        """Close the assignments a member's cursor now covers (in the open transaction)."""
        if not session.delivery_mode.queue or session.aid is None:
            return
        with self.db.atomic():
            self.db.execute(
                "UPDATE queue_assignments INDEXED BY queue_open SET open = 0 WHERE receiver = ? AND device_id = ? "
                "AND slot_id = ? AND sender = ? AND seq <= ? AND open = 1",
                (session.aid, session.device_id, session.slot_id, sender, up_to_seq),
            )

    # -- what a member sees --------------------------------------------------------------------

    def _prev_in_view(self, receiver: str, sender: str, member: Member, seq: int) -> int:
        row = self.db.row(
            f"SELECT i.seq {_JOIN} WHERE i.receiver = ? AND i.sender = ? AND i.seq < ? AND {_VIEW} "
            "ORDER BY i.seq DESC LIMIT 1", (receiver, sender, seq, *member),
        )
        return 0 if row is None else int(row[0])

    def pull(
        self, session: Session, sender: str, after_seq: int, limit: int, max_bytes: int | None
    ) -> tuple[list[dict[str, Any]], bool]:
        """A member's page of `sender`'s messages after `after_seq` in its view: at most `limit`,
        and no more once they reach `max_bytes` (at least one). Unassigned messages in the page
        become the member's (in the open transaction). Returns the rows and whether more remain."""
        assert session.aid is not None
        receiver, member = session.aid, _member(session)
        found = self.db.rows(
            f"SELECT i.seq, i.body, a.seq IS NULL {_JOIN} WHERE i.receiver = ? AND i.sender = ? AND i.seq > ? "
            f"AND {_VIEW} ORDER BY i.seq LIMIT ?", (receiver, sender, after_seq, *member, limit + 1),
        )
        rows: list[dict[str, Any]] = []
        size = 0
        more = len(found) > limit
        prev: int | None = None
        for seq, body, unassigned in found[:limit]:
            size += len(body)
            if rows and max_bytes is not None and size > max_bytes:
                more = True
                break
            row = json.loads(body)
            if prev is None:
                prev = self._prev_in_view(receiver, sender, member, seq)
            row["prev_peer_seq"] = prev
            prev = seq
            if unassigned:
                self._assign(receiver, seq, sender, member)
                self._assigned(StoredMessage(receiver, seq, row), session, "pull")
            rows.append(row)
        return rows, more

    def peers(
        self, session: Session, *, pending_only: bool, after_sender: str = "", limit: int | None = None
    ) -> list[PeerEntry]:
        """The senders with messages in a member's view, in sender order, with its cursor for each."""
        assert session.aid is not None
        receiver, member = session.aid, _member(session)
        heads = self.db.rows(
            f"SELECT i.sender, MAX(i.seq) {_JOIN} WHERE i.receiver = ? AND i.sender > ? AND {_VIEW} "
            "GROUP BY i.sender ORDER BY i.sender", (receiver, after_sender, *member),
        )
        entries = []
        for sender, head in heads:
            ack = self.inboxes.ack_seq(receiver, *member, sender)
            if pending_only and head <= ack:
                continue
            next_seq = self.db.value(
                f"SELECT MIN(i.seq) {_JOIN} WHERE i.receiver = ? AND i.sender = ? AND i.seq > ? AND {_VIEW}",
                (receiver, sender, ack, *member),
            )
            entries.append(PeerEntry(sender, int(head), ack, None if next_seq is None else int(next_seq)))
            if limit is not None and len(entries) >= limit:
                break
        return entries

    # -- take-over -----------------------------------------------------------------------------

    def _take_over(self, aid: str, owner: Member | None) -> tuple[list[tuple[Session, StoredMessage]], bool]:
        """Re-issue up to `TAKEOVER_BATCH` open messages of `owner` (None: of every member
        not online) to the online members. Returns the newest copy per (taker, sender) and whether
        open messages remain."""
        mode = self.mode_of(aid)
        if mode is None or not mode.queue or not self.members(aid):
            return [], False
        online = {_member(s) for s in self.members(aid)}
        # Through the index of open assignments only: acknowledged ones may be many, open ones are few.
        query = ("SELECT seq, sender, device_id, slot_id FROM queue_assignments INDEXED BY queue_open "
                 "WHERE receiver = ? AND open = 1")
        args: tuple[Any, ...] = (aid,)
        if owner is not None:
            query += " AND device_id = ? AND slot_id = ?"
            args += owner
        rows: list[tuple[Any, ...]] = []
        last, more = 0, False
        while len(rows) < TAKEOVER_BATCH:
            found = self.db.rows(f"{query} AND seq > ? ORDER BY seq LIMIT ?",
                                 (*args, last, TAKEOVER_BATCH))
            if not found:
                break
            last = int(found[-1][0])
            rows.extend(r for r in found if (r[2], r[3]) not in online and not self._awaited(aid, (r[2], r[3])))
            if len(rows) >= TAKEOVER_BATCH:
                more = True
        rows = rows[:TAKEOVER_BATCH]
        newest: dict[tuple[Session, str], StoredMessage] = {}
        for seq, sender, device_id, slot_id in rows:
            if seq <= self.inboxes.ack_seq(aid, device_id, slot_id, sender):  # acknowledged after all
                with self.db.atomic():
                    self.db.execute("UPDATE queue_assignments SET open = 0 WHERE receiver = ? AND seq = ?", (aid, seq))
                continue
            moved = self._reissue(aid, int(seq), sender, mode)
            if moved is None:
                break
            newest[(moved[0], sender)] = moved[1]
        return [(taker, copy) for (taker, _), copy in newest.items()], more

    def _reissue(self, aid: str, seq: int, sender: str, mode: DeliveryMode) -> tuple[Session, StoredMessage] | None:
        body = self.db.value("SELECT body FROM inbox WHERE receiver = ? AND seq = ?", (aid, seq))
        original = json.loads(body)
        taker = self._pick(aid, sender, mode, readers(original))
        if not isinstance(taker, Session):  # no member online (a re-issue is never held)
            return None
        row = {key: value for key, value in original.items() if key not in ("seq", "prev_peer_seq")}
        copy = self.inboxes.append_copy(aid, sender, seq, row)
        with self.db.atomic():
            self.db.execute("UPDATE queue_assignments SET moved_to = ?, open = 0 WHERE receiver = ? AND seq = ?",
                            (copy.seq, aid, seq))
        self._assign(aid, copy.seq, sender, _member(taker))
        self.events.emit("message.reissued", receiver=aid, sender=sender, message_id=original["message_id"],
                         from_seq=seq, seq=copy.seq, connection_id=taker.id, device_id=taker.device_id)
        self._assigned(copy, taker, "reissue")
        return taker, copy

    async def _take_over_each(self, aids: list[str], owner: Member | None) -> None:
        done = 0
        try:
            for aid in aids:
                done += 1
                await self._take_over_rest(aid, owner)
        finally:  # cancelled (the loop is closing): the AIDs not reached are not moving any more
            for aid in aids[done:]:
                self._moved(aid)

    async def _take_over_rest(self, aid: str, owner: Member | None) -> None:
        """Move `owner`'s open messages batch by batch, committing and pushing after each."""
        moving = True
        try:
            while True:
                newest, more = self._take_over(aid, owner)
                if not more:  # at once, in the turn of the last look: a message routed later is not held
                    self._moved(aid)
                    moving = False
                await self.db.commit()
                for taker, copy in newest:
                    self.push(copy, taker)
                if not more:
                    return
                await asyncio.sleep(0)
        except Exception:
            if self.db.closed:  # the database closed under us: the gateway is stopping
                log.debug("take-over of %s's messages stopped: the gateway is closing", aid)
            else:  # a failed commit rolled back: the messages stay open, taken over next time
                log.exception("take-over of %s's open queue messages failed", aid)
        finally:
            if moving:
                self._moved(aid)

    def _moved(self, aid: str) -> None:
        left = self._moving.get(aid, 0) - 1
        if left > 0:
            self._moving[aid] = left
        else:
            self._moving.pop(aid, None)
