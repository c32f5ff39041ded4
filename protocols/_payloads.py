"""AUN payloads and mentions: the typed payloads, the kept-whole unknown one, and the size limit.

[`protocols.aun`][protocols.aun] exports the public names; the message envelope there carries one
payload.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator
from pydantic_core import PydanticSerializationError

from ._identifiers import AID, is_text
from .errors import InvalidMessageError, PayloadTooLargeError

__all__ = [
    "FAST_PATH_BYTES",
    "MAX_PAYLOAD_BYTES",
    "PAYLOAD_CLASSES",
    "AIDMention",
    "FrozenModel",
    "JsonPayload",
    "Mention",
    "Payload",
    "PayloadHolder",
    "ScopeMention",
    "TextPayload",
    "ToolCallPayload",
    "ToolResultPayload",
    "UnknownPayload",
    "check_payload_size",
    "invalid_message",
    "payload_from_json",
]

#: The AUN client refuses to send a frame over 1,000,000 bytes, so no payload may be larger.
MAX_PAYLOAD_BYTES = 1_000_000


class FrozenModel(BaseModel):
    # One published object reaches every subscriber in-process: nobody may change it under the others.
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class AIDMention(FrozenModel):
    """A mention of one agent, optionally with where it sits in the text."""

    aid: AID
    display: str | None = None
    offset: int | None = Field(default=None, ge=0)
    length: int | None = Field(default=None, ge=0)


class ScopeMention(FrozenModel):
    """A mention of everyone in the group."""

    scope: Literal["all"] = "all"


def _mention_tag(value: Any) -> str:
    if isinstance(value, dict):
        return "scope" if "scope" in value else "aid"
    return "scope" if isinstance(value, ScopeMention) else "aid"


Mention = Annotated[
    Annotated[AIDMention, Tag("aid")] | Annotated[ScopeMention, Tag("scope")],
    Discriminator(_mention_tag),
]


class TextPayload(FrozenModel):
    """Plain or formatted text, with structured mentions."""

    type: Literal["text"] = "text"
    text: str
    format: str = "plain"
    mentions: tuple[Mention, ...] = ()


class JsonPayload(FrozenModel):
    """Structured data. `kind` names what it is; typed contract classes travel as this payload."""

    type: Literal["json"] = "json"
    kind: str = Field(min_length=1)
    data: Any = None
    schema_: str | None = Field(default=None, alias="schema")
    fallback_text: str | None = None


class ToolCallPayload(FrozenModel):
    """The sender announces a call of its *own* tool, for display. The receiver runs nothing."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int | None = Field(default=None, ge=0)


class ToolResultPayload(FrozenModel):
    """The sender reports the outcome of its own tool call (`result` if `ok`, else `error`)."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str = Field(min_length=1)
    ok: bool
    result: Any = None
    error: Any = None

    @model_validator(mode="after")
    def _result_or_error(self) -> ToolResultPayload:
        if not self.ok and self.error is None:
            raise ValueError("a tool_result with ok=false needs an 'error'")
        return self


class UnknownPayload(FrozenModel):
    """Any payload type this contract does not model, kept whole: every field survives a round trip."""

    model_config = ConfigDict(frozen=True, extra="allow")
    type: str = Field(min_length=1)


_KNOWN_PAYLOAD_TYPES = frozenset({"text", "json", "tool_call", "tool_result"})


def _payload_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _KNOWN_PAYLOAD_TYPES else "unknown"


Payload = Annotated[
    Annotated[TextPayload, Tag("text")]
    | Annotated[JsonPayload, Tag("json")]
    | Annotated[ToolCallPayload, Tag("tool_call")]
    | Annotated[ToolResultPayload, Tag("tool_result")]
    | Annotated[UnknownPayload, Tag("unknown")],
    Discriminator(_payload_tag),
]

# JSON escapes a character in at most 6 bytes (\uXXXX) and a mention takes well under 512, so a text
# payload under this estimate cannot reach the limit: the common case is checked without encoding.
FAST_PATH_BYTES = MAX_PAYLOAD_BYTES - 4096

#: The payload class each known ``type`` names: a payload instance of exactly that class is valid as is.
PAYLOAD_CLASSES: dict[Any, type[BaseModel]] = {
    "text": TextPayload,
    "json": JsonPayload,
    "tool_call": ToolCallPayload,
    "tool_result": ToolResultPayload,
}



def check_payload_size(payload: BaseModel) -> None:
    """Refuse a payload over `MAX_PAYLOAD_BYTES`, or one that is not valid Unicode text."""
    if (
        isinstance(payload, TextPayload)
        and 6 * len(payload.text) + 512 * len(payload.mentions) < FAST_PATH_BYTES
        and is_text(payload.text)
    ):
        return
    try:
        size = len(payload.model_dump_json(by_alias=True).encode())
    except (UnicodeEncodeError, PydanticSerializationError) as exc:
        raise InvalidMessageError(
            f"invalid message: payload: text that is not valid Unicode (a lone surrogate): {exc}", field="payload"
        ) from None
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadTooLargeError(size, MAX_PAYLOAD_BYTES)


def invalid_message(exc: ValidationError) -> InvalidMessageError:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return InvalidMessageError(
        f"invalid message: {where or 'message'}: {first.get('msg')}", field=where or None
    )


def payload_from_json(data: str | bytes | dict[str, Any]) -> Payload:
    """Validate a payload on its own (used by transports that carry payload and envelope separately)."""
    raw = json.loads(data) if isinstance(data, str | bytes) else data
    try:
        return PayloadHolder.model_validate({"payload": raw}).payload
    except ValidationError as exc:
        raise invalid_message(exc) from None


class PayloadHolder(BaseModel):
    payload: Payload
