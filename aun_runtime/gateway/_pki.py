"""The development PKI: a root, an issuer and the gateway's auth certificate, made on first start.

The AUN client trusts a gateway only through certificates: it checks the auth certificate returned
by `auth.aid_login1` against the chain from `/pki/chain` up to a root it trusts (given to it
as `root_ca_path`), and checks every peer's certificate the same way before encrypting to it. So
the gateway keeps a three-level PKI in `<data>/pki/`:

```text
root.pem    self-signed root CA (10 years)         <- the file a client is told to trust
issuer.pem  issuer CA signed by the root (5 years)  <- signs agents, the auth leaf, CRL, OCSP
auth.pem    the gateway's auth leaf (1 year, renewed on start when near its end)
```

Agent certificates last 3 years (renewal is not implemented).

with `*.key.pem` beside each (P-256, unencrypted, mode 0600). It is a development CA: anyone who
holds `root.key.pem` can mint identities, so never install its root outside development.

Agent certificates (CN = the AID) are issued by `DevelopmentPKI.issue_agent_certificate`; the
gateway stores them in its database, not here.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import ocsp
from cryptography.x509.oid import NameOID

__all__ = ["DevelopmentPKI", "cert_fingerprints"]

_ROOT_YEARS = 10
_ISSUER_YEARS = 5
_LEAF_DAYS = 365
#: Agent certificates outlive the auth leaf: the gateway does not implement certificate renewal.
_AGENT_DAYS = 3 * 365
#: The auth leaf is re-issued on start when fewer days than this remain, so a long-lived data
#: directory never serves an expired auth certificate.
_LEAF_RENEW_DAYS = 30
#: CRL and OCSP answers are signed fresh for this long; clients cache them at most this long.
_STATUS_VALIDITY = dt.timedelta(hours=1)

_KeyAndCert = tuple[ec.EllipticCurvePrivateKey, x509.Certificate]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "aun-runtime development gateway"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def cert_fingerprints(cert: x509.Certificate) -> tuple[str, str]:
    """The sha256 hex digests of the certificate's DER and of its public key's SPKI DER."""
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.fingerprint(hashes.SHA256()).hex(), hashlib.sha256(spki).hexdigest()


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


class DevelopmentPKI:
    """Loads the PKI from `directory`, creating whatever is missing.

    Args:
        directory: where the PEM files live (created if needed).
        issuer_domain: the domain this gateway issues AIDs for (`alice.<issuer_domain>`).
    """

    def __init__(self, directory: Path, issuer_domain: str) -> None:
        self.directory = directory
        self.issuer_domain = issuer_domain
        directory.mkdir(parents=True, exist_ok=True)
        self.root_key, self.root_cert = self._load_or_create("root", self._make_root)
        self.issuer_key, self.issuer_cert = self._load_or_create("issuer", self._make_issuer)
        self.auth_key, self.auth_cert = self._load_or_create("auth", self._make_auth_leaf)
        if self.auth_cert.not_valid_after_utc - _now() < dt.timedelta(days=_LEAF_RENEW_DAYS):
            self.auth_key, self.auth_cert = self._save("auth", *self._make_auth_leaf())
        self.chain_pem = (
            self.issuer_cert.public_bytes(serialization.Encoding.PEM)
            + self.root_cert.public_bytes(serialization.Encoding.PEM)
        ).decode()
        self.auth_cert_pem = self.auth_cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def root_path(self) -> Path:
        """The root certificate a client must trust (`AIDStore(root_ca_path=...)`)."""
        return self.directory / "root.pem"

    # -- creation ------------------------------------------------------------------------------

    def _load_or_create(self, stem: str, make: Callable[[], _KeyAndCert]) -> _KeyAndCert:
        cert_path, key_path = self.directory / f"{stem}.pem", self.directory / f"{stem}.key.pem"
        if cert_path.exists() and key_path.exists():
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{key_path} is not an EC private key")
            return key, x509.load_pem_x509_certificate(cert_path.read_bytes())
        key, cert = make()
        return self._save(stem, key, cert)

    def _save(
        self, stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        _write_private(self.directory / f"{stem}.key.pem", _key_pem(key))
        (self.directory / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return key, cert

    def _builder(
        self, subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int
    ) -> x509.CertificateBuilder:
        start = _now() - dt.timedelta(minutes=5)  # tolerate a little clock skew on the client
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=days))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        )

    @staticmethod
    def _ca_usage() -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
        )

    @staticmethod
    def _leaf_usage() -> x509.KeyUsage:
        # key_agreement: the AID key is also the identity key of end-to-end encryption (ECDH).
        return x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=True, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
        )

    def _make_root(self) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(f"aun-runtime development root CA ({self.issuer_domain})")
        cert = (
            self._builder(name, name, key.public_key(), _ROOT_YEARS * 365)
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(self._ca_usage(), critical=True)
            .sign(key, hashes.SHA256())
        )
        return key, cert

    def _make_issuer(self) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            self._builder(_name(f"{self.issuer_domain} issuer CA"), self.root_cert.subject, key.public_key(),
                          _ISSUER_YEARS * 365)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(self._ca_usage(), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_cert.public_key()),  # type: ignore[arg-type]
                critical=False,
            )
            .sign(self.root_key, hashes.SHA256())
        )
        return key, cert

    def _make_auth_leaf(self) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        return key, self._sign_leaf(f"auth.{self.issuer_domain}", key.public_key())

    def _sign_leaf(
        self, common_name: str, public_key: ec.EllipticCurvePublicKey, days: int = _LEAF_DAYS
    ) -> x509.Certificate:
        return (
            self._builder(_name(common_name), self.issuer_cert.subject, public_key, days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(self._leaf_usage(), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.issuer_cert.public_key()),  # type: ignore[arg-type]
                critical=False,
            )
            .sign(self.issuer_key, hashes.SHA256())
        )

    # -- operations ----------------------------------------------------------------------------

    def issue_agent_certificate(self, aid: str, public_key_der: bytes) -> x509.Certificate:
        """A certificate with CN = `aid` for the P-256 public key given as SPKI DER.

        Raises:
            ValueError: the key is not a P-256 public key.
        """
        public_key = serialization.load_der_public_key(public_key_der)
        if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.name != "secp256r1":
            raise ValueError("the public key must be an ECDSA P-256 key")
        return self._sign_leaf(aid, public_key, _AGENT_DAYS)

    def sign_with_auth_key(self, data: bytes) -> str:
        """Base64 DER ECDSA-SHA256 signature by the gateway's auth key (proves the server to a client)."""
        return base64.b64encode(self.auth_key.sign(data, ec.ECDSA(hashes.SHA256()))).decode()

    def crl_pem(self, revoked_serials: list[int]) -> str:
        """A CRL signed by the issuer, listing `revoked_serials`."""
        now = _now()
        builder = x509.CertificateRevocationListBuilder().issuer_name(self.issuer_cert.subject)
        builder = builder.last_update(now).next_update(now + _STATUS_VALIDITY)
        for serial in revoked_serials:
            builder = builder.add_revoked_certificate(
                x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now).build()
            )
        return builder.sign(self.issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()

    def ocsp_response(self, cert: x509.Certificate, revoked: bool) -> str:
        """A base64 DER OCSP response for `cert`, signed by the issuer (SHA-256 CertID)."""
        now = _now()
        status = ocsp.OCSPCertStatus.REVOKED if revoked else ocsp.OCSPCertStatus.GOOD
        response = (
            ocsp.OCSPResponseBuilder()
            .add_response(
                cert=cert, issuer=self.issuer_cert, algorithm=hashes.SHA256(), cert_status=status,
                this_update=now, next_update=now + _STATUS_VALIDITY,
                revocation_time=now if revoked else None, revocation_reason=None,
            )
            .responder_id(ocsp.OCSPResponderEncoding.HASH, self.issuer_cert)
            .sign(self.issuer_key, hashes.SHA256())
        )
        return base64.b64encode(response.public_bytes(serialization.Encoding.DER)).decode()
