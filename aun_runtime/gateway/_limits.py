"""Every bound the gateway enforces, in one place, with what happens when it is reached."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GatewayLimits"]


@dataclass(frozen=True, slots=True)
class GatewayLimits:
    """Bounds and deadlines of a :class:`GatewayServer`. The defaults suit a development machine.

    Attributes:
        max_frame_bytes: the largest request frame answered normally. The AUN client never sends
            more than 1,000,000 bytes; a larger frame gets -32600 and the socket stays open.
        hard_frame_bytes: frames are read into memory only up to this size; a larger one closes the
            socket with 1009 (message too big), so a peer cannot make the server buffer without bound.
        rate_per_second: requests one connection may make per second, sustained (a token bucket).
        rate_burst: requests one connection may make at once before the sustained rate applies. A
            request past the budget gets -32429 with ``retry_after_ms``; nothing is queued for it.
        requests_in_flight: requests of one connection handled at once. Pipelined requests overlap,
            so a sender's burst shares one SQLite commit; past this many, the connection's next
            frame is not read until one finishes (backpressure, nothing dropped).
        outbound_frames: frames (answers and pushes) waiting to be written to one connection. A
            connection that lets this many pile up is too slow to keep up with its pushes: it is
            closed with 1013, and since every pushed message is stored first, the client pulls
            what it missed when it reconnects. Nothing is lost.
        max_connections: open sockets in total; the next upgrade is refused with HTTP 503.
        challenge_ttl: seconds a socket's challenge nonce stays valid; a socket that has not
            completed ``auth.connect`` by then is closed (1008).
        login_nonce_ttl: seconds between ``auth.aid_login1`` and the ``auth.aid_login2`` that
            uses its nonce (once).
        pending_logins: login nonces kept waiting for their second phase; past this, the oldest
            is forgotten (its login has to start again).
        access_token_ttl: seconds an access token is accepted by ``auth.connect``.
        refresh_token_ttl: seconds a refresh token (and the chain it starts at login) lives.
        max_refreshes: refreshes one login may chain before a full login is required again.
        signature_window: seconds a ``client_signature`` timestamp may differ from server time.
        max_page: the most messages, events or peers one pull or directory page returns.
        max_page_bytes: a pull page stops growing past this many bytes of messages (it always holds
            at least one), so an answer stays under the 2 MiB the AUN client accepts per frame.
    """

    max_frame_bytes: int = 1_000_000
    hard_frame_bytes: int = 2_097_152
    rate_per_second: float = 500.0
    rate_burst: int = 1000
    requests_in_flight: int = 64
    outbound_frames: int = 1024
    max_connections: int = 10_000
    challenge_ttl: float = 30.0
    login_nonce_ttl: float = 60.0
    pending_logins: int = 10_000
    access_token_ttl: float = 3600.0
    refresh_token_ttl: float = 30 * 24 * 3600.0
    max_refreshes: int = 720
    signature_window: float = 300.0
    max_page: int = 200
    max_page_bytes: int = 1_500_000

    def __post_init__(self) -> None:
        if self.hard_frame_bytes < self.max_frame_bytes:
            raise ValueError("hard_frame_bytes must be at least max_frame_bytes")
        for name in ("rate_per_second", "rate_burst", "requests_in_flight", "outbound_frames", "max_connections", "max_page"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
