"""How a gateway agent reaches the AUN network: gateway, data directory, exposed AIDs, trust roots.

The same application runs on the embedded runtime alone and on the network by configuration only:
a [`GatewayAgentConfig`][aun_runtime.network.GatewayAgentConfig] (or the `AUN_GATEWAY_*` environment variables, or the CLI options
of `aun-runtime run`) says where the gateway is and which local AIDs it carries.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.aun import QUEUE_ROUTINGS

from ._outbox import DEFAULT_OUTBOX_CAPACITY

__all__ = ["GatewayAgentConfig"]

#: The environment variables :meth:`GatewayAgentConfig.from_env` reads.
ENV_URL = "AUN_GATEWAY_URL"
ENV_DATA = "AUN_GATEWAY_DATA"
ENV_EXPOSE = "AUN_GATEWAY_EXPOSE"
ENV_ROOT_CA = "AUN_GATEWAY_ROOT_CA"
ENV_SEED = "AUN_GATEWAY_SEED"
ENV_PLAINTEXT = "AUN_GATEWAY_PLAINTEXT"
ENV_RECONNECT = "AUN_GATEWAY_RECONNECT_MAX_DELAY"
ENV_QUEUE = "AUN_GATEWAY_QUEUE"
ENV_INVITATIONS = "AUN_GATEWAY_ACCEPT_INVITATIONS"
#: Whether an AID may be put into a group by an invitation: ``accept(aid, invitation)``.
AcceptInvitation = Callable[[str, Mapping[str, Any]], bool]
DEFAULT_DATA_DIR = "aun-agent-data"
_SEED_FILE = "seed"


@dataclass(frozen=True)
class GatewayAgentConfig:
    """Where and how local agents meet the AUN network.

    Attributes:
        data_dir: where each exposed AID's keys and tokens (one AUN client directory per AID), the
            outbox and the key-store seed live.
        gateway_url: the gateway's WebSocket URL (`ws://127.0.0.1:20001/aun` for the local one).
            None: find it by AUN discovery, as on the public network.
        expose: the local AIDs that get an AUN identity; None: every AID registered in the runtime
            when the gateway agent starts.
        root_ca_path: an extra trusted root (the local gateway's development root). The client's
            bundled AUN root is always trusted.
        seed: the secret that encrypts the local key stores; None: a random one, kept in
            `data_dir/seed` (mode 0600) from the first start on.
        encrypt: end-to-end encrypt direct and group messages (the AUN client's default). False
            sends them in plaintext.
        discovery_port: the HTTPS port AUN discovery asks (`/.well-known/aun-gateway`), if not 443.
        verify_ssl: TLS certificate checks for `wss://`; None: the client's default (on).
        reconnect_max_delay: the longest the client waits between reconnect attempts, in seconds.
        outbox_capacity: messages that may wait for the network before sends are refused.
        max_attempts: tries of one message that fails for a reason other than the connection (the
            recipient has no keys yet, a rate limit) before it becomes a dead letter.
        retry_max_delay: the longest wait between those tries, in seconds.
        client_log_level: what the AUN client prints to stderr: `debug`, `info`, `warn` or
            `error` (this runtime logs through `logging` under `aun_runtime.gateway`).
        thoughts: put what an exposed agent thinks (`think()`, an observer's silent decisions)
            about a message from the network as an AUN thought about it, never as a message: about
            a direct message for that conversation (`message.thought.put`, end-to-end encrypted
            for the sender when `encrypt` is on), which the sender reads with
            `message.thought.get`; about a network group's message for that group
            (`group.thought.put`, encrypted for the group's members when `encrypt` is on),
            which members read with `group.thought.get`. Off by default: thoughts then stay in
            the archive only.
        queue_routing: None (the default) connects each exposed AID in AUN's `fanout` delivery
            mode: every connection of the AID gets every direct message. `"round_robin"` or
            `"sender_affinity"` connects it as a `queue` member instead: several runtimes that
            expose the same AID (with the same identity: its key and certificate, and the same
            seed) share its direct messages, each message going to one of them, in turn or by
            sender. Every runtime serving one AID must say the same (the gateway refuses the
            others with `delivery_mode_conflict`); group messages reach every runtime either way.
        accept_invitations: what an exposed AID does with an invitation into a network group (the
            AUN client's `group.invite_received`; its own `create_group(members=...)` invites).
            False (the default): nothing, the invitation waits and is logged; who puts this
            runtime's agents into groups is this runtime's code (`create_group`, or an owner's
            `group.add_member`). True: every invitation is accepted. A callable
            `accept(aid, invitation)` (the event as the client gives it: `group_id`,
            `inviter_aids`, `invite_id`...) accepts those it returns True for.
    """

    data_dir: Path = field(default_factory=lambda: Path(DEFAULT_DATA_DIR))
    gateway_url: str | None = None
    expose: tuple[str, ...] | None = None
    root_ca_path: str | None = None
    seed: str | None = None
    encrypt: bool = True
    discovery_port: int | None = None
    verify_ssl: bool | None = None
    reconnect_max_delay: float = 8.0
    outbox_capacity: int = DEFAULT_OUTBOX_CAPACITY
    max_attempts: int = 12
    retry_max_delay: float = 30.0
    client_log_level: str = "error"
    thoughts: bool = False
    queue_routing: str | None = None
    accept_invitations: bool | AcceptInvitation = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(self.data_dir))
        if self.expose is not None:
            object.__setattr__(self, "expose", tuple(self.expose))
        if self.client_log_level not in ("debug", "info", "warn", "error"):
            raise ValueError("client_log_level is one of debug, info, warn, error")
        if self.max_attempts < 1 or self.reconnect_max_delay <= 0 or self.retry_max_delay <= 0:
            raise ValueError("max_attempts, reconnect_max_delay and retry_max_delay must be positive")
        if self.queue_routing is not None and self.queue_routing not in QUEUE_ROUTINGS:
            raise ValueError(f"queue_routing is None (fanout), {' or '.join(repr(r) for r in QUEUE_ROUTINGS)}")

    @property
    def delivery_mode(self) -> dict[str, str]:
        """The AUN client's `delivery_mode` connect option for this configuration."""
        if self.queue_routing is None:
            return {"mode": "fanout"}
        return {"mode": "queue", "routing": self.queue_routing}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> GatewayAgentConfig:
        """A config from `AUN_GATEWAY_URL`, `AUN_GATEWAY_DATA`, `AUN_GATEWAY_EXPOSE` (comma
        separated), `AUN_GATEWAY_ROOT_CA`, `AUN_GATEWAY_SEED`, `AUN_GATEWAY_PLAINTEXT=1`,
        `AUN_GATEWAY_RECONNECT_MAX_DELAY` (seconds), `AUN_GATEWAY_QUEUE` (a
        `queue_routing`) and `AUN_GATEWAY_ACCEPT_INVITATIONS=1`; keyword arguments win over
        the environment."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        if env.get(ENV_URL):
            values["gateway_url"] = env[ENV_URL]
        if env.get(ENV_DATA):
            values["data_dir"] = Path(env[ENV_DATA])
        if env.get(ENV_EXPOSE):
            values["expose"] = split_aids(env[ENV_EXPOSE])
        if env.get(ENV_ROOT_CA):
            values["root_ca_path"] = env[ENV_ROOT_CA]
        if env.get(ENV_SEED):
            values["seed"] = env[ENV_SEED]
        if env.get(ENV_PLAINTEXT, "").strip().lower() in ("1", "true", "yes"):
            values["encrypt"] = False
        if env.get(ENV_RECONNECT):
            values["reconnect_max_delay"] = float(env[ENV_RECONNECT])
        if env.get(ENV_QUEUE):
            values["queue_routing"] = env[ENV_QUEUE].strip()
        if env.get(ENV_INVITATIONS, "").strip().lower() in ("1", "true", "yes"):
            values["accept_invitations"] = True
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]

    def identity_path(self, aid: str) -> Path:
        """The AUN client directory of one exposed AID (each has its own: own device id, own keys)."""
        return self.data_dir / "identities" / aid

    @property
    def outbox_path(self) -> Path:
        return self.data_dir / "outbox.sqlite"

    def key_seed(self) -> str:
        """The key-store seed: the configured one, or the one kept in `data_dir` (made once)."""
        if self.seed:
            return self.seed
        path = self.data_dir / _SEED_FILE
        if path.is_file():
            return path.read_text().strip()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        seed = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(seed)
        return seed


def split_aids(text: str | Sequence[str]) -> tuple[str, ...]:
    """`"a.x, b.x"` (or a list of such strings) as a tuple of AIDs."""
    parts = [text] if isinstance(text, str) else list(text)
    return tuple(aid.strip() for part in parts for aid in part.split(",") if aid.strip())
