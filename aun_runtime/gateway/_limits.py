"""Every bound the gateway enforces, in one place, with what happens when it is reached."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GatewayLimits"]


@dataclass(frozen=True, slots=True)
class GatewayLimits:
    """Bounds and deadlines of a [`GatewayServer`][aun_runtime.gateway.GatewayServer]. The defaults suit a development machine.

    Attributes:
        max_frame_bytes: the largest request frame answered normally. The AUN client never sends
            more than 1,000,000 bytes; a larger frame gets -32600 and the socket stays open.
        hard_frame_bytes: frames are read into memory only up to this size; a larger one closes the
            socket with 1009 (message too big), so a peer cannot make the server buffer without bound.
        rate_per_second: requests one connection may make per second, sustained (a token bucket).
        rate_burst: requests one connection may make at once before the sustained rate applies. A
            request past the budget gets -32429 with `retry_after_ms`; nothing is queued for it.
        requests_in_flight: requests of one connection handled at once. Pipelined requests overlap,
            so a sender's burst shares one SQLite commit; past this many, the connection's next
            frame is not read until one finishes (backpressure, nothing dropped).
        outbound_frames: frames (answers and pushes) waiting to be written to one connection. A
            push that finds this many queued means the connection is too slow to keep up: it is
            closed with 1013, and since every pushed message is stored first, the client pulls
            what it missed when it reconnects. Nothing is lost. An answer that finds the queue full
            waits for room, and once `requests_in_flight` answers wait, the connection's next
            request is not read (backpressure); every such wait ends when the socket does.
        outbound_bytes: bytes (UTF-8, as sent) waiting to be written to one connection, queued or
            waiting for a queue slot. The frame that would take a connection past it (answer or
            push) closes the connection with 1013, as too slow, and its queue is dropped, so a
            client that asks for big pull pages and never reads them holds at most this much
            memory. A frame is always accepted when nothing is waiting, so any single frame fits.
        send_timeout: seconds a connection may leave the server unable to write to it (its socket
            buffers full because the peer does not read). Past it a WebSocket is closed with 1013
            (the TCP connection is dropped if the close cannot be sent either) and an HTTP
            connection is dropped. Everything it was owed is released.
        max_connections: open TCP connections in total (HTTP and WebSocket, counted from the
            accept, before any request): the next is answered HTTP 503 and closed. It is kept below
            the process's descriptor limit (see `descriptor_reserve`).
        descriptor_reserve: file descriptors kept free for everything else in the process (the
            database, logs, outgoing connections). At start, `max_connections` is lowered, with a
            warning, to the soft `RLIMIT_NOFILE` minus this, so connections alone never exhaust
            descriptors; if the limit leaves no room at all the gateway refuses to start. Should
            descriptors run out anyway, the listener stops accepting, backs off (0.05 s doubling to
            1 s) and logs once per episode.
        handshake_timeout: seconds a TCP connection may stay open without a complete HTTP request:
            after the accept, and between requests of a keep-alive connection. Past it the
            connection is closed, so idle or half-sent requests do not hold a connection slot.
        heartbeat: seconds a WebSocket may stay silent before the server pings it; one that does
            not answer within half that is closed, so a peer that vanished without a FIN or RST
            (a half-open connection) does not keep its slot.
        max_connections_per_aid: authenticated connections (long and short) one AID may hold at
            once; `auth.connect` past it is answered 4012 (retryable: the client reconnects with
            backoff) and the socket stays unauthenticated. It bounds how many copies of one push
            a single send can make.
        challenge_ttl: seconds a socket's challenge nonce stays valid; a socket that has not
            completed `auth.connect` by then is closed (1008).
        login_nonce_ttl: seconds between `auth.aid_login1` and the `auth.aid_login2` that
            uses its nonce (once).
        pending_logins: login nonces kept waiting for their second phase; past this, the oldest
            is forgotten (its login has to start again).
        access_token_ttl: seconds an access token is accepted by `auth.connect`.
        refresh_token_ttl: seconds a refresh token (and the chain it starts at login) lives.
        max_refreshes: refreshes one login may chain before a full login is required again.
        signature_window: seconds a `client_signature` timestamp may differ from server time.
        max_page: the most messages, events or peers one pull or directory page returns.
        max_page_bytes: a pull page stops growing past this many bytes of messages (it always holds
            at least one), so an answer stays under the 2 MiB the AUN client accepts per frame.
        queue_affinity_senders: senders whose member one AID in `queue` mode with
            `sender_affinity` remembers; past it the least recently routed is forgotten (its next
            message gets a member by turn, and it sticks to that one).
        max_group_members: members one group may have (the owner counts); adding or accepting
            past it is refused with -33004 (`scope` `members`). Every member's device gets its
            own key wrap in each encrypted group message, so a group's size is a message's size.
        max_groups_per_aid: groups one AID may own at once (a dissolved one no longer counts);
            creating past it is refused with -33004 (`scope` `groups`).
        queue_rejoin_grace: seconds after the gateway starts during which the unacknowledged queue
            messages of a member that was connected before the restart stay that member's (a member
            coming back first does not take them; a sender's new messages under `sender_affinity`
            wait with them); only then do those of a member still not back go to the others. 0
            hands them over at the first member's connect. At most an hour.
    """

    max_frame_bytes: int = 1_000_000
    hard_frame_bytes: int = 2_097_152
    rate_per_second: float = 500.0
    rate_burst: int = 1000
    requests_in_flight: int = 64
    outbound_frames: int = 1024
    outbound_bytes: int = 8 * 1024 * 1024
    send_timeout: float = 20.0
    max_connections: int = 10_000
    descriptor_reserve: int = 64
    handshake_timeout: float = 10.0
    heartbeat: float = 60.0
    max_connections_per_aid: int = 8
    challenge_ttl: float = 30.0
    login_nonce_ttl: float = 60.0
    pending_logins: int = 10_000
    access_token_ttl: float = 3600.0
    refresh_token_ttl: float = 30 * 24 * 3600.0
    max_refreshes: int = 720
    signature_window: float = 300.0
    max_page: int = 200
    max_page_bytes: int = 1_500_000
    queue_affinity_senders: int = 10_000
    max_group_members: int = 1000
    max_groups_per_aid: int = 1000
    # The AUN client reconnects 16 to 32 s after the server closed its connection (its backoff starts
    # at 16 s then, with up to as much jitter again): with a gateway back within 16 s, a minute lets
    # every member return before another takes its work, and is well inside the five minutes AUN's
    # own queue keeps a message.
    queue_rejoin_grace: float = 60.0

    def __post_init__(self) -> None:
        if self.hard_frame_bytes < self.max_frame_bytes:
            raise ValueError("hard_frame_bytes must be at least max_frame_bytes")
        for name in ("rate_per_second", "rate_burst", "requests_in_flight", "outbound_frames", "outbound_bytes",
                     "send_timeout", "max_connections", "handshake_timeout", "heartbeat", "max_connections_per_aid",
                     "max_page", "queue_affinity_senders", "max_group_members", "max_groups_per_aid"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not 0 <= self.queue_rejoin_grace <= 3600:
            raise ValueError("queue_rejoin_grace must be from 0 to 3600 seconds")
        if self.descriptor_reserve < 0:
            raise ValueError("descriptor_reserve must not be negative")
