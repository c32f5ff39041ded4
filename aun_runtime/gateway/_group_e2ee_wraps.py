"""One member device's share of an encrypted group message: its own key wrap, and the proof that
the sender signed it.

An `e2ee.group_encrypted` envelope carries a key wrap per recipient device (`recipients`, rows
of `[aid, device_id, role, key_source, fingerprint, spk_id, wrap_nonce, wrapped_key]`) and their
Merkle root (`recipients_digest`), which the sender's signature covers. A device needs only its
own row: pushed to it, the envelope carries that row as `recipient` and, as `merkle_proof`, the
sibling hashes from its leaf up to the root, so the device checks that the gateway handed it a
wrap the sender signed without seeing anyone else's. The AUN client consumes a group push
without a further pull only in this form; the whole envelope stays what the log keeps and what
`group.v2.pull` answers.

The tree (AUN E2EE V2, recipients digest): a leaf is SHA-256 over `LEAF_PREFIX`, the six text
fields each followed by a zero byte, then the wrap nonce and the wrapped key as bytes (their
base64 decoded); a node is SHA-256 over `NODE_PREFIX`, the left and the right child; a layer of
odd length pairs its last node with itself; a single leaf is the root.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

__all__ = ["LEAF_PREFIX", "NODE_PREFIX", "DeviceShares"]

LEAF_PREFIX = b"AUN-V2-RCPT-LEAF-v1"
NODE_PREFIX = b"AUN-V2-RCPT-NODE-v1"
#: The fields of a wrap row, in order, as the share's `recipient` names them.
_ROW_FIELDS = ("aid", "device_id", "role", "key_source", "fp", "spk_id", "wrap_nonce", "wrapped_key")
#: The roles a member's own device holds a wrap in (`audit` wraps are for auditors' AIDs).
_OWN_ROLES = frozenset({"member", "self_sync"})


class DeviceShares:
    """The shares of one envelope, one per device asked for; its tree is built once, for the first.

    Args:
        envelope: an envelope that passed the send's shape check (`recipients` is a list of rows
            of eight strings).
    """

    def __init__(self, envelope: dict[str, Any]) -> None:
        self._envelope = envelope
        self._layers: list[list[bytes]] | None = None

    def of(self, aid: str, device_id: str) -> dict[str, Any] | None:
        """The envelope as delivered to `aid`'s device `device_id`; None when it has no wrap for
        that device (nor one for every device of `aid`), or when its digest is not its wraps'
        root (the device then gets the whole envelope, and its own check refuses it)."""
        envelope = self._envelope
        rows: list[list[str]] = envelope["recipients"]
        own = [i for i, row in enumerate(rows) if row[0] == aid and row[2] in _OWN_ROLES]
        index = next((i for i in own if rows[i][1] == device_id), next((i for i in own if rows[i][1] == ""), None))
        if index is None:
            return None
        if self._layers is None:
            self._layers = _layers([_leaf(row) for row in rows])
        if self._layers[-1][0].hex() != envelope.get("recipients_digest"):
            return None
        share = {key: value for key, value in envelope.items() if key != "recipients"}
        share["recipient"] = dict(zip(_ROW_FIELDS, rows[index], strict=True))
        share["merkle_proof"] = _proof(self._layers, index)
        if rows[index][1] == "":  # a wrap for every device of the AID: say which device this copy is for
            share["delivery_device_id"] = device_id
        return share


def _leaf(row: list[str]) -> bytes:
    digest = hashlib.sha256(LEAF_PREFIX)
    for text in row[:6]:
        digest.update(text.encode())
        digest.update(b"\x00")
    for encoded in row[6:]:
        digest.update(_bytes(encoded))
    return digest.digest()


def _bytes(encoded: str) -> bytes:
    """A wrap field's bytes: its base64 decoded, or its text as is when it is not base64 (as a
    receiver reads it, so both sides hash the same bytes)."""
    try:
        return base64.b64decode(encoded)
    except (binascii.Error, ValueError):
        return encoded.encode()


def _layers(leaves: list[bytes]) -> list[list[bytes]]:
    """Every layer of the tree, the leaves first and the root's alone last; each layer of odd
    length gets its last node repeated before it is paired."""
    layers = [leaves]
    while len(layers[-1]) > 1:
        layer = layers[-1]
        if len(layer) % 2:
            layer.append(layer[-1])
        layers.append([hashlib.sha256(NODE_PREFIX + layer[i] + layer[i + 1]).digest() for i in range(0, len(layer), 2)])
    return layers


def _proof(layers: list[list[bytes]], index: int) -> list[dict[str, str]]:
    """The siblings from leaf `index` up to the root, each with the side it is on."""
    proof = []
    for layer in layers[:-1]:
        sibling = index ^ 1
        proof.append({"sibling": layer[sibling].hex(), "position": "R" if sibling > index else "L"})
        index //= 2
    return proof
