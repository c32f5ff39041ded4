"""What group end-to-end encryption keeps on the gateway: public key material and signed states.

Three kinds of record, all public or opaque to the gateway:

* a member device's **group prekey** (its signed SPK for one group), at most
  `MAX_DEVICES_PER_MEMBER` per member and group (the oldest is dropped);
* a group's last **confirmed state**: the membership snapshot its owner or an admin signed, the
  signature, the hash the clients computed over it, and the chain of confirmed hashes;
* at most one **pending proposal** per group, replaced by a newer proposal.

Messages themselves are rows of the group message log (`GroupStore`): the encrypted envelope is
kept as the client sent it, so nothing here can decrypt anything.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from ._database import Database

__all__ = ["MAX_DEVICES_PER_MEMBER", "GroupE2EEStore", "GroupState", "next_chain"]

#: Group prekeys kept per member and group; a member that registers more loses its oldest.
MAX_DEVICES_PER_MEMBER = 16


def next_chain(previous_chain: str, state_hash: str) -> str:
    """The state chain after confirming `state_hash`: a hash over the previous chain and it, so
    two histories that differ anywhere have different chains (what a client compares)."""
    return hashlib.sha256(f"{previous_chain}|{state_hash}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class GroupState:
    """A confirmed membership state of one group."""

    state_version: int
    state_hash: str
    prev_state_hash: str
    key_epoch: int
    membership_snapshot: str
    signature: str
    actor_aid: str
    state_chain: str
    committed_aids: tuple[str, ...]
    confirmed_at: float

    def to_wire(self, group_id: str) -> dict[str, Any]:
        return {
            "group_id": group_id, "group_aid": group_id, "state_version": self.state_version,
            "state_hash": self.state_hash, "prev_state_hash": self.prev_state_hash, "key_epoch": self.key_epoch,
            "membership_snapshot": self.membership_snapshot, "policy_snapshot": "", "signature": self.signature,
            "actor_aid": self.actor_aid, "state_chain": self.state_chain,
            "confirmed_at": int(self.confirmed_at * 1000),
        }


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class GroupE2EEStore:
    """Group prekeys, confirmed states and pending proposals in the gateway database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- group prekeys -------------------------------------------------------------------------

    def put_prekey(self, group_id: str, aid: str, device_id: str, body: dict[str, Any]) -> None:
        with self.db.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO group_prekeys (group_id, aid, device_id, body, updated_at) "
                "VALUES (?, ?, ?, ?, ?)", (group_id, aid, device_id, _dump(body), time.time()),
            )
            self.db.execute(
                "DELETE FROM group_prekeys WHERE group_id = ? AND aid = ? AND device_id NOT IN ("
                "SELECT device_id FROM group_prekeys WHERE group_id = ? AND aid = ? "
                "ORDER BY updated_at DESC LIMIT ?)", (group_id, aid, group_id, aid, MAX_DEVICES_PER_MEMBER),
            )

    def prekeys(self, group_id: str, aid: str) -> list[dict[str, Any]]:
        """The group prekeys of `aid`'s devices, oldest first, each with its `device_id`."""
        rows = self.db.rows(
            "SELECT device_id, body FROM group_prekeys WHERE group_id = ? AND aid = ? ORDER BY updated_at",
            (group_id, aid),
        )
        return [{"device_id": device_id, **json.loads(body)} for device_id, body in rows]

    def drop_member(self, group_id: str, aid: str) -> None:
        """Forget a departed member's group prekeys (nobody may wrap for them any more) and any
        pending proposal that still names them (it can no longer be confirmed as it stands)."""
        with self.db.atomic():
            self.db.execute("DELETE FROM group_prekeys WHERE group_id = ? AND aid = ?", (group_id, aid))
        pending = self.proposal(group_id)
        if pending is not None and aid in pending.get("committed_aids", ()):
            self.drop_proposal(group_id)

    def drop_group(self, group_id: str) -> None:
        """Forget every key, state and proposal of a dissolved group."""
        with self.db.atomic():
            for table in ("group_prekeys", "group_states", "group_proposals"):
                self.db.execute(f"DELETE FROM {table} WHERE group_id = ?", (group_id,))

    # -- confirmed state -----------------------------------------------------------------------

    def state(self, group_id: str) -> GroupState | None:
        row = self.db.row("SELECT body FROM group_states WHERE group_id = ?", (group_id,))
        if row is None:
            return None
        fields = json.loads(row[0])
        fields["committed_aids"] = tuple(fields["committed_aids"])
        return GroupState(**fields)

    def set_state(self, group_id: str, state: GroupState) -> None:
        body = asdict(state)
        body["committed_aids"] = list(state.committed_aids)
        with self.db.atomic():
            self.db.execute("INSERT OR REPLACE INTO group_states (group_id, body) VALUES (?, ?)", (group_id, _dump(body)))
            self.db.execute("DELETE FROM group_proposals WHERE group_id = ?", (group_id,))

    # -- pending proposal ----------------------------------------------------------------------

    def proposal(self, group_id: str) -> dict[str, Any] | None:
        row = self.db.row("SELECT body FROM group_proposals WHERE group_id = ?", (group_id,))
        return None if row is None else dict(json.loads(row[0]))

    def put_proposal(self, group_id: str, proposal: dict[str, Any]) -> None:
        """Store `proposal` as the group's pending one, replacing any older one."""
        with self.db.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO group_proposals (group_id, proposal_id, body, created_at) VALUES (?, ?, ?, ?)",
                (group_id, proposal["proposal_id"], _dump(proposal), time.time()),
            )

    def drop_proposal(self, group_id: str) -> None:
        with self.db.atomic():
            self.db.execute("DELETE FROM group_proposals WHERE group_id = ?", (group_id,))
