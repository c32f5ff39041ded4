"""Verification of the `client_signature` the AUN client attaches to sensitive requests.

Shape: `{aid, cert_fingerprint: "sha256:<hex of cert DER>", timestamp: "<unix seconds>",
params_hash, signature}`, where `params_hash` is the SHA-256 of the params without
`client_signature` and without keys starting with `_`, dumped as JSON with sorted keys, no
spaces and non-ASCII kept, and `signature` is base64 DER ECDSA-SHA256 over
`"{method}|{aid}|{timestamp}|{params_hash}"` by the AID's key.

The signer must be the connection's own AID: a request signed by anyone else is refused, whatever
the signature's validity, so no frame can act for another AID.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from ._errors import ErrorCode, RPCError
from ._identities import CertRecord

__all__ = ["params_hash", "verify_client_signature"]

_FIELDS = ("aid", "cert_fingerprint", "timestamp", "params_hash", "signature")


def params_hash(params: dict[str, Any]) -> str:
    """The hash the client signs: params minus the signature and private `_` keys."""
    signed = {key: value for key, value in params.items() if key != "client_signature" and not key.startswith("_")}
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _refuse(message: str) -> RPCError:
    return RPCError(ErrorCode.SIGNATURE_INVALID, message, field="client_signature")


def verify_client_signature(
    method: str, params: dict[str, Any], *, connection_aid: str, cert: CertRecord, window: float
) -> None:
    """Raise -32003 unless `params['client_signature']` is the connection AID's valid signature."""
    signature = params.get("client_signature")
    if not isinstance(signature, dict) or not all(isinstance(signature.get(name), str) for name in _FIELDS):
        raise _refuse(f"client_signature must be an object with string fields {', '.join(_FIELDS)}")
    if signature["aid"] != connection_aid:
        raise _refuse(f"client_signature is by {signature['aid']!r}, but this connection is {connection_aid!r}")
    fingerprint = signature["cert_fingerprint"].lower()
    if not fingerprint.startswith("sha256:") or fingerprint[7:] != cert.cert_sha256 or cert.revoked:
        raise _refuse("client_signature names a certificate that is not the AID's current one")
    timestamp = signature["timestamp"]
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > window:
        raise _refuse(f"client_signature timestamp is more than {int(window)} s from server time: check the clock")
    expected = params_hash(params)
    if not hmac.compare_digest(expected, signature["params_hash"]):
        raise _refuse("client_signature params_hash does not match the params sent")
    try:
        der = base64.b64decode(signature["signature"], validate=True)
        signed = f"{method}|{connection_aid}|{timestamp}|{expected}".encode()
        cert.public_key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
    except (binascii.Error, ValueError, InvalidSignature):
        raise _refuse("client_signature does not verify with the AID's certificate") from None
