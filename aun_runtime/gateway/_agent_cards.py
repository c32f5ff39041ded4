"""Stored agent.md cards: one per AID, checked before they are kept, kept in the gateway's database.

A card is what an AID publishes about itself (`PUT /agent.md` with `Host: <aid>`) and what
anyone reads back (`GET /agent.md`). The AUN client signs a card by appending a signature block
(`<!-- AUN-SIGNATURE ... -->`) after the document; the gateway keeps the bytes as they came, so a
reader can check that signature against the AID's certificate, and checks only what it serves on:
the size, UTF-8, YAML front matter naming this AID, and the fields every card has.

The bound per AID is one card of at most `MAX_CARD_BYTES`: a new card replaces the old one.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from email.utils import formatdate

from ..base._agent_md import (
    BEHAVIOR_MODE_FIELD,
    MAX_AGENT_MD_BYTES,
    SIGNATURE_MARKER,
    AgentMDError,
    read_front_matter,
)
from ._database import Database

__all__ = ["MAX_CARD_BYTES", "MAX_SIGNATURE_BYTES", "CardError", "CardStore", "StoredCard", "check_card"]

#: The size of the signature block the AUN client appends after a card (its own limit), on top of
#: the document's :data:`~aun_runtime.agentmd.MAX_AGENT_MD_BYTES`.
MAX_SIGNATURE_BYTES = 2048
#: The largest card body the gateway takes: a full-size document plus a full-size signature block.
MAX_CARD_BYTES = MAX_AGENT_MD_BYTES + MAX_SIGNATURE_BYTES
#: Fields every card has (the agent.md schema's required ones, as the AUN client checks them).
_REQUIRED = ("aid", "name", "type", "version")


class CardError(Exception):
    """A card refused: `status` is the HTTP status, `code` a stable word for it."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class StoredCard:
    """One AID's card as stored."""

    aid: str
    body: bytes
    etag: str  #: ``"<sha256 hex of the body>"``, the strong ETag the AUN client computes itself
    updated_at: float
    behavior_mode: str | None

    @property
    def last_modified(self) -> str:
        return formatdate(self.updated_at, usegmt=True)


def check_card(aid: str, body: bytes) -> str | None:
    """Check a card published for `aid`; return the behaviour mode it declares, if any.

    Raises:
        CardError: 413 `too_large`; 400 `invalid` (not UTF-8, no front matter, a field
            missing or not a string); 403 `aid_mismatch` (the card names another AID).
    """
    if len(body) > MAX_CARD_BYTES:
        raise CardError(413, "too_large", f"the card is {len(body)} bytes; the limit is {MAX_CARD_BYTES}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise CardError(400, "invalid", "the card is not UTF-8") from None
    document = text.split(SIGNATURE_MARKER, 1)[0]
    if len(document.encode()) > MAX_AGENT_MD_BYTES:
        raise CardError(413, "too_large", f"the document is over {MAX_AGENT_MD_BYTES} bytes before its signature")
    try:  # a leading byte-order mark is tolerated, as the client tolerates it
        front, _ = read_front_matter(document.removeprefix("\ufeff"))
    except AgentMDError as exc:
        raise CardError(400, "invalid", str(exc)) from None
    for name in _REQUIRED:
        value = front.get(name)
        if not isinstance(value, str) or not value.strip():
            raise CardError(400, "invalid", f"the front matter needs '{name}' as a non-empty string")
    if front["aid"].strip().lower() != aid:
        raise CardError(403, "aid_mismatch", f"the card is for {front['aid']!r}, not {aid!r}")
    mode = front.get(BEHAVIOR_MODE_FIELD)
    if mode is not None and not isinstance(mode, str):
        raise CardError(400, "invalid", f"'{BEHAVIOR_MODE_FIELD}' must be a string")
    return mode


class CardStore:
    """The `agent_cards` table: one card per AID."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, aid: str) -> StoredCard | None:
        row = self.db.row(
            "SELECT body, etag, updated_at, behavior_mode FROM agent_cards WHERE aid = ?", (aid,)
        )
        if row is None:
            return None
        return StoredCard(aid, bytes(row[0]), str(row[1]), float(row[2]), row[3])

    def put(self, aid: str, body: bytes, behavior_mode: str | None) -> StoredCard:
        """Store `body` as `aid`'s card, replacing any earlier one (commit with `db.commit`)."""
        card = StoredCard(aid, body, f'"{hashlib.sha256(body).hexdigest()}"', time.time(), behavior_mode)
        with self.db.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO agent_cards (aid, body, etag, updated_at, behavior_mode) VALUES (?, ?, ?, ?, ?)",
                (aid, card.body, card.etag, card.updated_at, behavior_mode),
            )
        return card
