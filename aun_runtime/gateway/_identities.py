"""Registered AIDs: their certificates, their tokens and their devices' end-to-end prekeys.

Tokens are opaque random strings; only their SHA-256 is stored, so the database file alone does not
let anyone connect. A login starts a *family*: one access token and one refresh token. Each refresh
revokes the refresh token it used and issues a new pair in the same family, up to
`max_refreshes` times and never past the family's end (`refresh_token_ttl` after login). A
refresh token used twice means it leaked: the whole family is revoked and a new login is required,
and connections authenticated with one of its tokens are closed (see `on_family_revoked`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from ._database import Database
from ._pki import cert_fingerprints

__all__ = ["CertRecord", "IdentityStore", "RefreshOutcome", "TokenPair"]


@dataclass(frozen=True, slots=True)
class CertRecord:
    """One issued certificate."""

    aid: str
    serial_hex: str
    pem: str
    cert_sha256: str
    spki_sha256: str
    revoked: bool
    cert: x509.Certificate

    @property
    def public_key(self) -> ec.EllipticCurvePublicKey:
        key = self.cert.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey)  # only P-256 keys are ever certified here
        return key

    def matches(self, fingerprint: str) -> bool:
        """True if `fingerprint` (`sha256:<hex>`, 16 or 64 hex digits, of the cert or SPKI DER) is this one."""
        digest = fingerprint.strip().lower().removeprefix("sha256:")
        if len(digest) not in (16, 64):
            return False
        return self.cert_sha256.startswith(digest) or self.spki_sha256.startswith(digest)


@dataclass(frozen=True, slots=True)
class TokenPair:
    access_token: str
    refresh_token: str
    expires_in: int


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    """The result of a refresh: new tokens, or why not (`relogin_required` is always true then)."""

    aid: str | None
    tokens: TokenPair | None
    error: str | None = None


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class IdentityStore:
    """Certificates, tokens and prekeys in the gateway database. Certificates are cached in memory."""

    def __init__(self, db: Database, *, access_ttl: float, refresh_ttl: float, max_refreshes: int) -> None:
        self.db = db
        self.access_ttl = access_ttl
        self.refresh_ttl = refresh_ttl
        self.max_refreshes = max_refreshes
        # A cache of current certificates (one per registered AID); dropped on a failed commit.
        self._current: dict[str, CertRecord] = {}
        db.on_rollback.append(self._current.clear)
        #: Called with (family, aid) when a token family is revoked.
        self.on_family_revoked: list[Callable[[str, str], None]] = []

    # -- certificates --------------------------------------------------------------------------

    def _record(self, row: tuple[Any, ...]) -> CertRecord:
        aid, serial, pem, cert_sha, spki_sha, revoked_at = row
        return CertRecord(aid, serial, pem, cert_sha, spki_sha, revoked_at is not None,
                          x509.load_pem_x509_certificate(pem.encode()))

    def current(self, aid: str) -> CertRecord | None:
        """The AID's current certificate, or None if the AID is not registered here."""
        record = self._current.get(aid)
        if record is None:
            row = self.db.row(
                "SELECT c.aid, c.serial, c.cert_pem, c.cert_sha256, c.spki_sha256, c.revoked_at "
                "FROM identities i JOIN certificates c ON c.serial = i.serial WHERE i.aid = ?", (aid,)
            )
            if row is None:
                return None
            record = self._current[aid] = self._record(row)
        return record

    def is_registered(self, aid: str) -> bool:
        return self.current(aid) is not None

    def by_fingerprint(self, aid: str, fingerprint: str) -> CertRecord | None:
        rows = self.db.rows(
            "SELECT aid, serial, cert_pem, cert_sha256, spki_sha256, revoked_at FROM certificates WHERE aid = ?",
            (aid,),
        )
        return next((r for r in map(self._record, rows) if r.matches(fingerprint)), None)

    def by_serial(self, serial_hex: str) -> CertRecord | None:
        row = self.db.row(
            "SELECT aid, serial, cert_pem, cert_sha256, spki_sha256, revoked_at FROM certificates WHERE serial = ?",
            (serial_hex.lower().lstrip("0") or "0",),
        )
        return None if row is None else self._record(row)

    def revoked_serials(self) -> list[int]:
        rows = self.db.rows("SELECT serial FROM certificates WHERE revoked_at IS NOT NULL")
        return [int(serial, 16) for (serial,) in rows]

    def register(self, aid: str, cert: x509.Certificate, pem: str, *, rotate: bool = False) -> CertRecord:
        """Record `cert` as the AID's certificate (the caller checked the AID is free, or, with
        `rotate`, that the key may be replaced: the old certificate stays on record, for
        verifying what was signed with it, but is no longer current)."""
        cert_sha, spki_sha = cert_fingerprints(cert)
        serial = format(cert.serial_number, "x")
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO certificates (serial, aid, cert_pem, cert_sha256, spki_sha256, issued_at) "
                "VALUES (?, ?, ?, ?, ?, ?)", (serial, aid, pem, cert_sha, spki_sha, time.time()),
            )
            self.db.execute(f"INSERT {'OR REPLACE ' if rotate else ''}INTO identities (aid, serial) VALUES (?, ?)",
                            (aid, serial))
        record = self._current[aid] = CertRecord(aid, serial, pem, cert_sha, spki_sha, False, cert)
        return record

    # -- tokens --------------------------------------------------------------------------------

    def _issue(self, aid: str, family: str, refresh_count: int, family_end: float) -> TokenPair:
        now = time.time()
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        with self.db.atomic():
            self.db.executemany(
                "INSERT INTO tokens (token_hash, kind, aid, family, refresh_count, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                                (_hash(access), "access", aid, family, refresh_count, min(now + self.access_ttl, family_end)),
                                (_hash(refresh), "refresh", aid, family, refresh_count, family_end),
                ],
            )
        return TokenPair(access, refresh, max(1, int(min(self.access_ttl, family_end - now))))

    def login(self, aid: str) -> TokenPair:
        """Start a new token family for `aid` (after it proved possession of its key)."""
        return self._issue(aid, secrets.token_hex(16), 0, time.time() + self.refresh_ttl)

    def access_token_owner(self, token: str) -> tuple[str | None, str]:
        """The AID an access token belongs to and its family, or None and why it is refused."""
        row = self.db.row(
            "SELECT aid, family, expires_at, revoked FROM tokens WHERE token_hash = ? AND kind = 'access'",
            (_hash(token),),
        )
        if row is None:
            return None, "unknown access token: log in again"
        aid, family, expires_at, revoked = row
        if revoked:
            return None, "access token revoked: refresh it or log in again"
        if expires_at <= time.time():
            return None, "access token expired: refresh it"
        return str(aid), str(family)

    def refresh(self, refresh_token: str) -> RefreshOutcome:
        """Rotate `refresh_token`: revoke it, issue a new pair in its family."""
        row = self.db.row(
            "SELECT aid, family, refresh_count, expires_at, revoked FROM tokens WHERE token_hash = ? AND kind = 'refresh'",
            (_hash(refresh_token),),
        )
        if row is None:
            return RefreshOutcome(None, None, "invalid_or_expired_refresh_token")
        aid, family, count, family_end, revoked = row
        if revoked:
            # A rotated token presented again: someone else holds a copy. End the whole family.
            self.revoke_family(family)
            return RefreshOutcome(aid, None, "refresh_token_reused")
        if family_end <= time.time():
            return RefreshOutcome(aid, None, "invalid_or_expired_refresh_token")
        if count >= self.max_refreshes:
            return RefreshOutcome(aid, None, "refresh_limit_reached")
        with self.db.atomic():
            self.db.execute("UPDATE tokens SET revoked = 1 WHERE token_hash = ?", (_hash(refresh_token),))
        return RefreshOutcome(aid, self._issue(aid, family, count + 1, family_end))

    def revoke_family(self, family: str) -> None:
        """Revoke every token of `family`, and tell `on_family_revoked` (whose connections
        were authenticated with one of them must end too: a token is only checked at connect)."""
        with self.db.atomic():
            aid = self.db.row("SELECT aid FROM tokens WHERE family = ? LIMIT 1", (family,))
            self.db.execute("UPDATE tokens SET revoked = 1 WHERE family = ?", (family,))
        for listener in self.on_family_revoked:
            listener(family, "" if aid is None else str(aid[0]))

    def revoke_access_tokens(self, aid: str) -> int:
        """Revoke every access token of `aid` (refresh tokens stay valid). Returns how many."""
        with self.db.atomic():
            self.db.execute(
                "UPDATE tokens SET revoked = 1 WHERE aid = ? AND kind = 'access' AND revoked = 0", (aid,)
            )
            return int(self.db.value("SELECT changes()"))  # rows the UPDATE changed

    # -- prekeys -------------------------------------------------------------------------------

    def put_prekey(self, aid: str, device_id: str, body: dict[str, Any]) -> None:
        with self.db.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO prekeys (aid, device_id, body, updated_at) VALUES (?, ?, ?, ?)",
                (aid, device_id, json.dumps(body, ensure_ascii=False, allow_nan=False), time.time()),
            )

    def prekeys(self, aid: str) -> list[dict[str, Any]]:
        rows = self.db.rows(
            "SELECT device_id, body FROM prekeys WHERE aid = ? ORDER BY updated_at", (aid,)
        )
        return [{"device_id": device_id, **json.loads(body)} for device_id, body in rows]
