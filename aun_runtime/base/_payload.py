"""Turning what a caller passes to a send tool into an AUN payload."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

from pydantic import BaseModel

from protocols.aun import AIDMention, Mention, Payload, ScopeMention, TextPayload, payload_from_json
from protocols.contract import AUNContract
from protocols.errors import InvalidMessageError

__all__ = ["PayloadLike", "coerce_mentions", "coerce_payload"]

#: What the send tools accept: a payload model, a contract instance, a dict, or a string (text).
PayloadLike: TypeAlias = Payload | AUNContract | str | dict[str, Any]


def coerce_payload(payload: PayloadLike, mentions: Sequence[str | Mention] | None) -> Payload:
    body: Payload
    if isinstance(payload, str):
        body = TextPayload(text=payload)
    elif isinstance(payload, AUNContract):
        body = payload.to_payload()
    elif isinstance(payload, dict):
        if not isinstance(payload.get("type"), str):
            raise InvalidMessageError(
                f"a dict payload needs a string 'type' (got keys {sorted(map(str, payload))}): send "
                "{'type': 'text', 'text': ...} or {'type': 'json', 'kind': ..., 'data': ...}, "
                "or pass a string (sent as text) or a contract instance",
                field="payload.type",
            )
        body = payload_from_json(payload)
    elif isinstance(payload, BaseModel):
        body = payload
    else:
        raise InvalidMessageError(
            f"cannot send a {type(payload).__name__}: pass a payload, a contract instance, a dict or a string",
            field="payload",
        )
    if mentions:
        if not isinstance(body, TextPayload):
            raise InvalidMessageError("mentions ride on text payloads only", field="payload.mentions")
        body = body.model_copy(update={"mentions": body.mentions + coerce_mentions(mentions)})
    return body


def coerce_mentions(mentions: Sequence[str | Mention]) -> tuple[AIDMention | ScopeMention, ...]:
    """`["bob.local", "all"]` -> structured mentions."""
    out: list[AIDMention | ScopeMention] = []
    for item in mentions:
        if isinstance(item, AIDMention | ScopeMention):
            out.append(item)
        elif item == "all":
            out.append(ScopeMention())
        else:
            out.append(AIDMention(aid=item))
    return tuple(out)
