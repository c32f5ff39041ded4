"""What the gateway says about a group AID over HTTP: who owns it and which certificate is current.

A group's card (`/agent.md` with `Host: <group id>`) is signed by the group's own key and
published by its owner. Before a client publishes or trusts one it asks who may (the
*entity projection*): every answer about a bound group AID, a 404 included, carries

* `X-AUN-Entity-Owner-Aid`: the group's owner, the only AID whose token may publish the card;
* `X-AUN-Entity-Cert-Fingerprint`: `sha256:` and the hex digest of the group's current
  certificate (DER), the generation the card must name;
* `X-AUN-Ownership-Status: not_applicable` (a group has no ownership document) and
  `X-AUN-Entity-Verification-Status: current`.

`/pki/cert/<aid>?consistency=authoritative` answers the current certificate with the headers a
client requires before it relies on one for ownership (`X-AUN-Cert-Consistency`, its lifecycle
state `active_signing`, its fingerprint and when it was observed): this gateway's store is the
authority, so every answer is authoritative and observed now.
"""

from __future__ import annotations

import datetime as dt

from ._gateway_core import GatewayCore
from ._identities import CertRecord

__all__ = ["authoritative_cert_headers", "card_publisher", "entity_headers", "record_binding"]


def record_binding(core: GatewayCore, group_id: str, record: CertRecord) -> None:
    """Remember that `record` is the certificate `group_id`'s AID was bound to."""
    with core.db.atomic():
        core.db.execute("INSERT OR REPLACE INTO group_aids (group_id, serial) VALUES (?, ?)",
                        (group_id, record.serial_hex))


def _bound_group(core: GatewayCore, aid: str) -> tuple[str, CertRecord] | None:
    """(owner, current certificate) of a group whose AID is bound, else None.

    Only a certificate the group was bound to counts: an agent's AID that happens to share a
    group's name stays its own (nobody else publishes its card).
    """
    group = core.groups.get(aid)
    record = core.identities.current(aid) if group is not None else None
    if group is None or record is None:
        return None
    row = core.db.row("SELECT serial FROM group_aids WHERE group_id = ?", (aid,))
    if row is None or row[0] != record.serial_hex:
        return None
    return group.owner_aid, record


def entity_headers(core: GatewayCore, aid: str) -> dict[str, str]:
    """The entity projection of `aid` if it is a bound group AID, else no headers."""
    bound = _bound_group(core, aid)
    if bound is None:
        return {}
    owner, record = bound
    return {"X-AUN-Entity-Owner-Aid": owner, "X-AUN-Entity-Cert-Fingerprint": "sha256:" + record.cert_sha256,
            "X-AUN-Ownership-Status": "not_applicable", "X-AUN-Entity-Verification-Status": "current"}


def card_publisher(core: GatewayCore, aid: str) -> str:
    """The AID whose access token may publish `aid`'s card: a group's owner, else `aid` itself."""
    bound = _bound_group(core, aid)
    return aid if bound is None else bound[0]


def authoritative_cert_headers(record: CertRecord) -> dict[str, str]:
    observed = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    state = "revoked" if record.revoked else "active_signing"
    return {"X-AUN-Cert-Consistency": "authoritative", "X-AUN-Cert-Lifecycle-State": state,
            "X-AUN-Cert-Fingerprint": "sha256:" + record.cert_sha256, "X-AUN-Cert-Observed-At": observed,
            "Cache-Control": "no-cache"}
