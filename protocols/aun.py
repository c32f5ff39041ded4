"""The AUN message contract: identifiers, payloads, mentions, group modes and the message envelope.

An [`AUNMessage`][protocols.aun.AUNMessage] is what one agent delivers to another, directly (`to`) or to a group
(`group_id`). Delivery carries no promise of an answer: the receiver may answer zero, one or many
times, later or never, and may start conversations of its own.

Payloads follow the AUN payload reference: `text`, `json`, `tool_call` and `tool_result`
are typed here; any other `type` (`image`, `file`, `voice`, a vendor's own...) is kept whole
as an [`UnknownPayload`][protocols.aun.UnknownPayload], never dropped and never rejected. `tool_call` and `tool_result`
annotate the *sender's own* tool use for display; receiving one obliges and runs nothing.

Mentions are structured (`{"aid": ...}` or `{"scope": "all"}`) and live inside a text payload.
A group in `mention` dispatch mode lets through, before any model sees it, only the messages whose
structured mentions name the receiver or everyone; text such as `@name` is never scanned.

Everything here is pure data: no I/O, no runtime, nothing of ours imported but the errors.

Example:
    >>> msg = AUNMessage(from_aid="alice.local", to="bob.local", payload=TextPayload(text="hi"))
    >>> msg.text
    'hi'
    >>> AUNMessage.from_json(msg.to_json()) == msg
    True
"""

from __future__ import annotations

import json
import json.encoder
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, ValidationError, model_validator

from ._dispatch_modes import (
    DispatchMode,
    dispatch_mode_or_none,
    mention_mode_of,
    parse_dispatch_mode,
    replies_name_the_sender,
)
from ._identifiers import (
    AID,
    AID_PATTERN,
    GROUP_ID_PATTERN,
    MAX_AID_LENGTH,
    GroupId,
    aid_domain,
    is_aid,
    is_text,
    new_message_id,
    validate_aid,
    validate_group_id,
    validate_message_id,
)
from ._payloads import (
    MAX_PAYLOAD_BYTES,
    PAYLOAD_CLASSES,
    AIDMention,
    FrozenModel,
    JsonPayload,
    Mention,
    Payload,
    ScopeMention,
    TextPayload,
    ToolCallPayload,
    ToolResultPayload,
    UnknownPayload,
    check_payload_size,
    invalid_message,
    payload_from_json,
)
from .errors import InvalidMessageError

__all__ = [
    "AID_PATTERN",
    "MAX_AID_LENGTH",
    "MAX_PAYLOAD_BYTES",
    "QUEUE_ROUTINGS",
    "ROUND_ROBIN",
    "SENDER_AFFINITY",
    "AIDMention",
    "AUNMessage",
    "DispatchMode",
    "JsonPayload",
    "Mention",
    "Payload",
    "ScopeMention",
    "TextPayload",
    "ToolCallPayload",
    "ToolResultPayload",
    "UnknownPayload",
    "aid_domain",
    "mention_mode_of",
    "new_message_id",
    "parse_dispatch_mode",
    "payload_from_json",
    "replies_name_the_sender",
    "validate_aid",
    "validate_group_id",
    "validate_message_id",
]

#: How a queue of several connections serving one AID picks the one that takes a message (AUN's
#: ``delivery_mode.routing``): each in turn...
ROUND_ROBIN = "round_robin"
#: ...or the same one for every message of a sender while it stays, so per-sender order holds.
SENDER_AFFINITY = "sender_affinity"
#: Every queue routing, the one place they are listed.
QUEUE_ROUTINGS = (ROUND_ROBIN, SENDER_AFFINITY)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AUNMessage(FrozenModel):
    """One AUN message: an envelope around a payload.

    Exactly one of `to` (a direct message) or `group_id` (a group message) is set.

    Attributes:
        message_id: unique per sender; the receiver's channel drops a second delivery of the same
            `(from_aid, message_id)`.
        from_aid: the sender. A runtime sets it from the sending agent, never from user input.
        seq: the position in the receiver's inbox (direct) or in the group (group), set on delivery.
        created_at: milliseconds since the epoch.
        in_reply_to: the message this one answers, if any (an answer is a new message, not a return).
        thread: the conversation this message belongs to (the first message's id).
        hops: how many messages led to this one within its thread; the loop guard caps it.
        dispatch_mode: for group messages, the group's mode snapshotted at send time, so a later
            change is never retroactive and every receiver decides alike.
    """

    wire_name: ClassVar[str] = "aun.Message"

    message_id: str = Field(default_factory=new_message_id, min_length=1, max_length=128)
    from_aid: AID
    to: AID | None = None
    group_id: GroupId | None = None
    seq: int | None = Field(default=None, ge=0)
    payload: Payload
    created_at: int = Field(default_factory=_now_ms)
    in_reply_to: str | None = None
    thread: str | None = None
    hops: int = Field(default=0, ge=0)
    dispatch_mode: Annotated[DispatchMode | None, BeforeValidator(dispatch_mode_or_none)] = None

    # The JSON text, computed once (the message is immutable). A slot, not a pydantic private
    # attribute: those are initialised in Python on every construction and read through
    # ``__getattr__``, which cost more per message than computing the JSON again.
    __slots__ = ("_json_text",)
    if TYPE_CHECKING:
        _json_text: str | None

    @model_validator(mode="before")
    @classmethod
    def _accept_wire_spellings(cls, data: Any) -> Any:
        # The newer wire names the field mention_mode; both spellings mean the same thing.
        if isinstance(data, dict) and "mention_mode" in data:
            data = dict(data)
            mode = data.pop("mention_mode")
            data.setdefault("dispatch_mode", mode)
        return data

    @model_validator(mode="after")
    def _check_envelope(self) -> AUNMessage:
        if (self.to is None) == (self.group_id is None):
            raise InvalidMessageError(
                "a message goes either to one agent ('to') or to one group ('group_id'), exactly one of them",
                field="to",
            )
        for name in ("message_id", "in_reply_to", "thread"):
            if not is_text(getattr(self, name)):
                raise InvalidMessageError(
                    f"invalid message: {name}: text that is not valid Unicode (a lone surrogate)", field=name
                )
        check_payload_size(self.payload)
        _set_attribute(self, "_json_text", None)  # set, so that to_json never takes the slow miss path
        return self

    @classmethod
    def assemble(
        cls,
        *,
        message_id: str,
        from_aid: str,
        payload: Payload,
        to: str | None = None,
        group_id: str | None = None,
        seq: int | None = None,
        in_reply_to: str | None = None,
        thread: str | None = None,
        hops: int = 0,
        dispatch_mode: DispatchMode | None = None,
    ) -> AUNMessage:
        """Build a message the way a runtime does on its hot path: same result, same errors, less work.

        Every field is checked, but with cheap tests on the usual shapes (AIDs against their
        pattern, a payload model instance of the class its type names, ids as short strings); a
        message that fits them is built without pydantic's validation pass, which costs more than
        the rest of a delivery. Anything unusual goes through `AUNMessage(...)` and its errors.
        """
        if (
            type(message_id) is str
            and 0 < len(message_id) <= 128
            and is_text(message_id)
            and is_aid(from_aid)
            and (to is None or is_aid(to))
            and (group_id is None or (type(group_id) is str and GROUP_ID_PATTERN.match(group_id) is not None))
            and (to is None) != (group_id is None)
            and PAYLOAD_CLASSES.get(getattr(payload, "type", None)) is type(payload)
            and (seq is None or (type(seq) is int and seq >= 0))
            and (in_reply_to is None or (type(in_reply_to) is str and is_text(in_reply_to)))
            and (thread is None or (type(thread) is str and is_text(thread)))
            and type(hops) is int
            and hops >= 0
            and (dispatch_mode is None or type(dispatch_mode) is DispatchMode)
        ):
            check_payload_size(payload)
            values = {
                "message_id": message_id,
                "from_aid": from_aid,
                "to": to,
                "group_id": group_id,
                "seq": seq,
                "payload": payload,
                "created_at": _now_ms(),
                "in_reply_to": in_reply_to,
                "thread": thread,
                "hops": hops,
                "dispatch_mode": dispatch_mode,
            }
            message = cls.__new__(cls)
            # What pydantic's own construction sets on an instance (as model_construct does).
            _set_attribute(message, "__dict__", values)
            _set_attribute(message, "__pydantic_fields_set__", set(values))
            _set_attribute(message, "__pydantic_extra__", None)
            _set_attribute(message, "__pydantic_private__", None)
            _set_attribute(message, "_json_text", None)
            return message
        return cls(
            message_id=message_id,
            from_aid=from_aid,
            payload=payload,
            to=to,
            group_id=group_id,
            seq=seq,
            in_reply_to=in_reply_to,
            thread=thread,
            hops=hops,
            dispatch_mode=dispatch_mode,
        )

    @property
    def is_group(self) -> bool:
        """True for a group message."""
        return self.group_id is not None

    @property
    def is_annotation(self) -> bool:
        """True for a `tool_call` or `tool_result` payload: a note on the sender's own tool use,
        shown to the conversation, not something said to anyone (receiving one runs nothing)."""
        return isinstance(self.payload, ToolCallPayload | ToolResultPayload)

    @property
    def text(self) -> str | None:
        """The text a human would read: the text payload, or a json payload's `fallback_text`."""
        payload = self.payload
        if isinstance(payload, TextPayload):
            return payload.text
        if isinstance(payload, JsonPayload):
            return payload.fallback_text
        return None

    @property
    def mentions(self) -> tuple[AIDMention | ScopeMention, ...]:
        """The structured mentions of a text payload (empty for other payloads)."""
        payload = self.payload
        return payload.mentions if isinstance(payload, TextPayload) else ()

    def mentions_aid(self, aid: str) -> bool:
        """True if the structured mentions name `aid` or everyone. Text is never scanned for `@`."""
        return any(isinstance(mention, ScopeMention) or mention.aid == aid for mention in self.mentions)

    def __eq__(self, other: object) -> bool:
        # Compare the fields only: the cached JSON is not part of a message's identity.
        return isinstance(other, AUNMessage) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((self.from_aid, self.message_id))

    def to_json(self) -> str:
        """The message as JSON, computed once and kept (the message is immutable)."""
        try:
            cached = self._json_text
        except AttributeError:  # made without validation (model_construct, a copy): not cached yet
            cached = None
        if cached is not None:
            return cached
        text = _envelope_json(self.__dict__)
        object.__setattr__(self, "_json_text", text)
        return text

    @classmethod
    def from_json(cls, data: str | bytes) -> AUNMessage:
        """Parse a message, raising `InvalidMessageError` naming the first bad field."""
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise invalid_message(exc) from None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AUNMessage:
        """Validate a message given as a dict, raising `InvalidMessageError` on bad input."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise invalid_message(exc) from None


# JSON strings as pydantic writes them: UTF-8 as is, only quotes, backslashes and control
# characters escaped (the same escapes, lowercase hex). The json module's own C function for it,
# without the encoder object's Python wrapper.
_json_string: Callable[[str], str] = json.encoder.encode_basestring


def _envelope_json(fields: dict[str, Any]) -> str:
    """The JSON of a message's fields, byte for byte what `model_dump_json(by_alias=True)` gives
    with its unset envelope fields left out (nothing inside the payload is: a payload is kept
    whole). The envelope is a handful of strings and integers, written directly; pydantic writes
    only the payload. That is a third of the cost of dumping the whole model with an `exclude`
    set, and every message is written once (to the archive and the wire)."""
    payload = fields["payload"]
    if type(payload) is TextPayload and not payload.mentions:  # the usual payload, written directly too
        text = payload.__dict__
        payload_json = f'{{"type":"text","text":{_json_string(text["text"])},"format":{_json_string(text["format"])},"mentions":[]}}'
    else:
        payload_json = payload.__pydantic_serializer__.to_json(payload, by_alias=True).decode()
    to, seq, thread = fields["to"], fields["seq"], fields["thread"]
    if (
        to is not None
        and seq is not None
        and thread is not None
        and fields["group_id"] is None
        and fields["in_reply_to"] is None
        and fields["dispatch_mode"] is None
    ):  # the usual direct message, in one expression
        return (
            f'{{"message_id":{_json_string(fields["message_id"])},"from_aid":{_json_string(fields["from_aid"])},'
            f'"to":{_json_string(to)},"seq":{seq},"payload":{payload_json},"created_at":{fields["created_at"]},'
            f'"thread":{_json_string(thread)},"hops":{fields["hops"]}}}'
        )
    parts = ['{"message_id":', _json_string(fields["message_id"]), ',"from_aid":', _json_string(fields["from_aid"])]
    if fields["to"] is not None:
        parts += [',"to":', _json_string(fields["to"])]
    if fields["group_id"] is not None:
        parts += [',"group_id":', _json_string(fields["group_id"])]
    if fields["seq"] is not None:
        parts += [',"seq":', str(fields["seq"])]
    parts += [',"payload":', payload_json, ',"created_at":', str(fields["created_at"])]
    if fields["in_reply_to"] is not None:
        parts += [',"in_reply_to":', _json_string(fields["in_reply_to"])]
    if fields["thread"] is not None:
        parts += [',"thread":', _json_string(fields["thread"])]
    parts += [',"hops":', str(fields["hops"])]
    if fields["dispatch_mode"] is not None:
        parts += [',"dispatch_mode":', _json_string(fields["dispatch_mode"].value)]
    parts.append("}")
    return "".join(parts)
_set_attribute = object.__setattr__
