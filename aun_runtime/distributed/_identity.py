"""Worker identity: a secret per worker, kept beside its archive, that proves its name to the host.

A worker's name is not a secret (the host's directory, its `Stats` answer and every delivery's
`aunorigin` attribute carry it), so a name alone must never be enough to act as a worker. Each
worker therefore has a secret: 32 random bytes (hex), made once with a durable worker's archive and
kept in `<archive>.secret` (mode 0600), or made anew for each run of an in-memory worker. The
worker presents name and secret as gRPC metadata on every call it makes to the host; the secret
never travels anywhere else.

The host remembers a SHA-256 digest of the secret for each name on the name's first connection
(trust on first use) and refuses, with `UNAUTHENTICATED`, any later connection that claims the
name with another secret. Nothing is hashed per message: a data stream is authenticated once, when
it opens, and everything that arrives on it is that worker's.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
from pathlib import Path

__all__ = [
    "MAX_SECRET_LENGTH",
    "MAX_WORKER_NAME_LENGTH",
    "Identities",
    "IdentityRefused",
    "secret_path",
    "valid_worker_name",
    "worker_secret",
]

logger = logging.getLogger("aun_runtime.distributed")

#: A worker name becomes part of an agent type (``aun.worker.<name>``) and a topic type
#: (``aun.ack.<name>``), so it follows autogen-core's rule for those, with a length limit.
_WORKER_NAME = re.compile(r"^[\w\-\.]+\Z")
MAX_WORKER_NAME_LENGTH = 100
MAX_SECRET_LENGTH = 256


def valid_worker_name(name: str) -> bool:
    return 0 < len(name) <= MAX_WORKER_NAME_LENGTH and _WORKER_NAME.match(name) is not None


def secret_path(archive: str | Path) -> Path:
    """Where the secret of the worker whose archive is `archive` is kept."""
    return Path(f"{archive}.secret")


def worker_secret(archive: str | Path | None) -> str:
    """The worker's secret: read from beside a durable archive (made there on first use), or a
    fresh one for an in-memory worker (`archive` None), which is a new worker on every run."""
    if archive is None:
        return secrets.token_hex(32)
    path = secret_path(archive)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under a temporary name, then linked into place: a process that reads the
    # file never sees it half-written, and of two processes that make it at once, one wins. Both
    # the file and its name are on the disk before the secret is used: the host binds the name to
    # it for good, so a crash of the machine must not take it back.
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink()
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return _read(path)


def _read(path: Path) -> str:
    secret = path.read_text().strip()
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        raise ValueError(f"{path} does not hold a worker secret (1-{MAX_SECRET_LENGTH} characters)")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        logger.warning("%s can be read by other users (mode %o); it should be 0600 (chmod 600 %s)", path, mode, path)
    return secret


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class IdentityRefused(Exception):
    """A claim to a worker name that the host does not accept."""


class Identities:
    """The host's memory of worker names: the digest of each name's secret, first come first bound.

    It lives as long as the host process, or across restarts in the host's state file (see
    `._host_state`), which keeps `digests` and gives them back to a restarted host.
    """

    def __init__(self, digests: dict[str, str] | None = None) -> None:
        self._digests: dict[str, bytes] = {name: bytes.fromhex(digest) for name, digest in (digests or {}).items()}

    def digests(self) -> dict[str, str]:
        """Each bound name's secret digest (hex): what the host's state file keeps."""
        return {name: digest.hex() for name, digest in sorted(self._digests.items())}

    def __len__(self) -> int:
        return len(self._digests)

    def check(self, name: str, secret: str | None, *, bind: bool) -> bool:
        """Accept `name` with `secret` or raise `IdentityRefused` saying why.

        With `bind`, a name seen for the first time is bound to `secret`; returns True then.
        """
        if not valid_worker_name(name):
            raise IdentityRefused(
                f"{name[:MAX_WORKER_NAME_LENGTH]!r} is not a worker name (1-{MAX_WORKER_NAME_LENGTH} letters, digits, '_', '-', '.')"
            )
        if not secret or len(secret) > MAX_SECRET_LENGTH:
            raise IdentityRefused(f"worker {name} presented no secret; a worker proves its name with the secret kept beside its archive")
        digest = _digest(secret)
        known = self._digests.get(name)
        if known is None:
            if not bind:
                raise IdentityRefused(f"worker {name} has no open stream to this host")
            self._digests[name] = digest
            return True
        if not hmac.compare_digest(known, digest):
            raise IdentityRefused(
                f"worker name {name} belongs to another worker: this host knows it with another secret. "
                "A worker proves its name with the secret kept beside its archive (<archive>.secret): "
                "restart it with its own archive, or give this one another name"
            )
        return False

    def forget(self, name: str) -> None:
        """The worker left for good: its name may be bound again."""
        self._digests.pop(name, None)
