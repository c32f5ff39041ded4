"""TLS for the host's port: a certificate the user supplies, and the CA that workers trust.

The host serves TLS when given a certificate chain and its key; a worker connects with TLS when
given the CA (or the self-signed certificate) to trust. With a client certificate on the worker and
`--tls-client-ca` on the host, both sides are authenticated (mutual TLS).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from ..base._errors import ConfigurationError

__all__ = ["HostTLS", "TLSConfig"]


def _read(path: str | Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:  # a setting that names no readable file: said in one line, exit 2
        raise ConfigurationError(
            f"cannot read the PEM file {path}: {exc.strerror or exc}: give the path of a readable PEM file", value=str(path)
        ) from None


@dataclass(frozen=True)
class TLSConfig:
    """A worker's TLS settings.

    Args:
        ca: PEM file of the CA (or self-signed certificate) that signed the host's certificate.
        cert: PEM client certificate, for a host that asks for one (mutual TLS).
        key: PEM key of `cert`.
        server_name: the name to check the host's certificate against, when it differs from the
            address (for example a certificate issued to `aun-host.internal`).
    """

    ca: str | Path
    cert: str | Path | None = None
    key: str | Path | None = None
    server_name: str | None = None

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca), private_key=_read(self.key), certificate_chain=_read(self.cert)
        )

    def channel_options(self) -> list[tuple[str, Any]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


@dataclass(frozen=True)
class HostTLS:
    """The host's TLS settings.

    Args:
        cert: PEM certificate chain of the host.
        key: PEM private key of the host.
        client_ca: if given, workers must present a certificate signed by this CA.
    """

    cert: str | Path
    key: str | Path
    client_ca: str | Path | None = None

    def server_credentials(self) -> grpc.ServerCredentials:
        key, cert = _read(self.key), _read(self.cert)
        assert key is not None and cert is not None
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=_read(self.client_ca), require_client_auth=self.client_ca is not None
        )
