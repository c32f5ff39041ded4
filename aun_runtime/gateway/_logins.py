"""Login nonces waiting for their second phase: single use, bound to one AID, with a deadline."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["PendingLogin", "PendingLogins"]


@dataclass(frozen=True, slots=True)
class PendingLogin:
    request_id: str
    aid: str
    nonce: str
    deadline: float


class PendingLogins:
    """At most `capacity` logins wait at once; a new one past that evicts the oldest."""

    def __init__(self, capacity: int, ttl: float) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._pending: OrderedDict[str, PendingLogin] = OrderedDict()

    def begin(self, aid: str) -> PendingLogin:
        now = time.monotonic()
        while self._pending:  # drop the expired ones at the front (they are in deadline order)
            oldest = next(iter(self._pending.values()))
            if oldest.deadline > now and len(self._pending) < self.capacity:
                break
            self._pending.popitem(last=False)
        login = PendingLogin("req-" + secrets.token_hex(12), aid, secrets.token_urlsafe(24), now + self.ttl)
        self._pending[login.request_id] = login
        return login

    def take(self, request_id: str) -> PendingLogin | None:
        """Remove and return the login (whatever happens next, its nonce is used up)."""
        login = self._pending.pop(request_id, None)
        if login is None or login.deadline < time.monotonic():
            return None
        return login
