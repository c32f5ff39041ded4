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

import itertools
import json
import json.encoder
import re
import secrets
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticSerializationError

from .errors import InvalidAIDError, InvalidGroupIdError, InvalidMessageError, PayloadTooLargeError

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
#: The AUN client refuses to send a frame over 1,000,000 bytes, so no payload may be larger.
MAX_PAYLOAD_BYTES = 1_000_000
#: A DNS name is at most 253 characters; an AID is a DNS-shaped name.
MAX_AID_LENGTH = 253
#: ``name.domain``: lowercase labels of letters, digits, ``-`` and ``_`` (the name may use ``_``).
AID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$")
_GROUP_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
_MAX_GROUP_ID_LENGTH = 128


def validate_message_id(message_id: str) -> str:
    """Return `message_id` if it can be a message's id, else raise `InvalidMessageError`.

    An id is 1 to 128 characters of text that UTF-8 can carry (no lone surrogate).

    Example:
        >>> validate_message_id("task-42")
        'task-42'
    """
    if not isinstance(message_id, str) or not 0 < len(message_id) <= 128:
        got = f"{len(message_id)} characters" if isinstance(message_id, str) else type(message_id).__name__
        raise InvalidMessageError(f"invalid message: message_id: 1 to 128 characters of text, not {got}", field="message_id")
    if not _is_text(message_id):
        raise InvalidMessageError(
            "invalid message: message_id: text that is not valid Unicode (a lone surrogate)", field="message_id"
        )
    return message_id


def validate_aid(aid: str) -> str:
    """Return `aid` if it is a valid AID, else raise `InvalidAIDError` saying why.

    Example:
        >>> validate_aid("coder.local")
        'coder.local'
    """
    if not isinstance(aid, str):
        raise InvalidAIDError(f"an AID is a string like 'coder.local', not {type(aid).__name__}")
    if len(aid) > MAX_AID_LENGTH:
        raise InvalidAIDError(f"AID is {len(aid)} characters long; the limit is {MAX_AID_LENGTH}")
    if AID_PATTERN.match(aid):
        return aid
    if aid.lower() != aid and AID_PATTERN.match(aid.lower()):
        raise InvalidAIDError(f"AIDs are lowercase: use {aid.lower()!r} instead of {aid!r}")
    if "." not in aid:
        # The example must itself be a valid AID, or following the advice only meets the next error.
        example = f"{aid.lower()}.local"
        hint = f", e.g. {example!r}" if AID_PATTERN.match(example) else ""
        raise InvalidAIDError(f"AID {aid!r} has no domain: write it as 'name.domain' in lowercase{hint}")
    raise InvalidAIDError(
        f"AID {aid!r} is not of the form 'name.domain' (lowercase letters, digits, '-' and '_', "
        "labels separated by dots)"
    )


def aid_domain(aid: str) -> str:
    """The domain of an AID: everything after its first dot (`coder.local` -> `local`)."""
    return aid.split(".", 1)[1]


def validate_group_id(group_id: str) -> str:
    """Return `group_id` if it can name a group (and a topic), else raise `InvalidGroupIdError`."""
    if not isinstance(group_id, str) or not _GROUP_ID_PATTERN.match(group_id):
        raise InvalidGroupIdError(
            f"group id {group_id!r} must be 1-{_MAX_GROUP_ID_LENGTH} lowercase letters, digits, '.', '-' "
            "or '_', starting with a letter or digit"
        )
    return group_id


def new_message_id() -> str:
    """A fresh, globally unique message id: 32 hex digits, like a UUID.

    A random 64-bit prefix drawn once per process, then a counter: unique across processes (a prefix
    collision is a 1 in 2**64 event), and an order of magnitude cheaper than asking the OS for 16
    random bytes per message.
    """
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


_ID_PREFIX = secrets.token_hex(8)
_ID_COUNTER = itertools.count(1)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


AID = Annotated[str, AfterValidator(validate_aid)]
GroupId = Annotated[str, AfterValidator(validate_group_id)]


class DispatchMode(StrEnum):
    """What a group's members see, decided by each receiver's channel before any model.

    `broadcast`: every group message reaches every member.
    `mention`: only messages whose structured mentions name the member, or everyone, reach it;
    the rest are archived with the reason, never dropped.
    """

    BROADCAST = "broadcast"
    MENTION = "mention"


#: Each mode in the newer wire spelling, a group's `mention_mode`: the one place it is written.
_MENTION_MODES = {DispatchMode.BROADCAST: "disabled", DispatchMode.MENTION: "mention-only"}

_DISPATCH_SPELLINGS = {
    **{mode.value: mode for mode in DispatchMode},
    **{spelling: mode for mode, spelling in _MENTION_MODES.items()},
    "mention_only": DispatchMode.MENTION,
}


def replies_name_the_sender(mode: DispatchMode | None) -> bool:
    """Whether a reply in a group of this mode names the member it answers, unless told otherwise,
    so that the member is shown it (in `mention` mode an unnamed reply would reach nobody).

    Example:
        >>> replies_name_the_sender(DispatchMode.MENTION), replies_name_the_sender(DispatchMode.BROADCAST)
        (True, False)
    """
    return mode is DispatchMode.MENTION


def mention_mode_of(mode: DispatchMode) -> str:
    """The `mention_mode` wire spelling of `mode`, as the AUN network's `group.*` methods use it.

    Example:
        >>> mention_mode_of(DispatchMode.MENTION)
        'mention-only'
    """
    return _MENTION_MODES[mode]


def parse_dispatch_mode(value: str | DispatchMode) -> DispatchMode:
    """Accept both spellings: `dispatch_mode` (`broadcast`/`mention`) and the newer
    `mention_mode` (`disabled`/`mention-only`).

    Example:
        >>> parse_dispatch_mode("mention-only")
        <DispatchMode.MENTION: 'mention'>
    """
    if isinstance(value, DispatchMode):
        return value
    mode = _DISPATCH_SPELLINGS.get(str(value).strip().lower())
    if mode is None:
        raise InvalidMessageError(
            f"unknown dispatch mode {value!r}: use 'broadcast' or 'mention' "
            "(or the mention_mode spellings 'disabled' and 'mention-only')",
            field="dispatch_mode",
        )
    return mode


def _dispatch_mode(value: Any) -> DispatchMode | None:
    return None if value is None else parse_dispatch_mode(value)


class _Frozen(BaseModel):
    # One published object reaches every subscriber in-process: nobody may change it under the others.
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class AIDMention(_Frozen):
    """A mention of one agent, optionally with where it sits in the text."""

    aid: AID
    display: str | None = None
    offset: int | None = Field(default=None, ge=0)
    length: int | None = Field(default=None, ge=0)


class ScopeMention(_Frozen):
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


class TextPayload(_Frozen):
    """Plain or formatted text, with structured mentions."""

    type: Literal["text"] = "text"
    text: str
    format: str = "plain"
    mentions: tuple[Mention, ...] = ()


class JsonPayload(_Frozen):
    """Structured data. `kind` names what it is; typed contract classes travel as this payload."""

    type: Literal["json"] = "json"
    kind: str = Field(min_length=1)
    data: Any = None
    schema_: str | None = Field(default=None, alias="schema")
    fallback_text: str | None = None


class ToolCallPayload(_Frozen):
    """The sender announces a call of its *own* tool, for display. The receiver runs nothing."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int | None = Field(default=None, ge=0)


class ToolResultPayload(_Frozen):
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


class UnknownPayload(_Frozen):
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
_FAST_PATH_BYTES = MAX_PAYLOAD_BYTES - 4096


class AUNMessage(_Frozen):
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
    dispatch_mode: Annotated[DispatchMode | None, BeforeValidator(_dispatch_mode)] = None

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
            if not _is_text(getattr(self, name)):
                raise InvalidMessageError(
                    f"invalid message: {name}: text that is not valid Unicode (a lone surrogate)", field=name
                )
        _check_payload_size(self.payload)
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
            and _is_text(message_id)
            and _is_aid(from_aid)
            and (to is None or _is_aid(to))
            and (group_id is None or (type(group_id) is str and _GROUP_ID_PATTERN.match(group_id) is not None))
            and (to is None) != (group_id is None)
            and _PAYLOAD_CLASSES.get(getattr(payload, "type", None)) is type(payload)
            and (seq is None or (type(seq) is int and seq >= 0))
            and (in_reply_to is None or (type(in_reply_to) is str and _is_text(in_reply_to)))
            and (thread is None or (type(thread) is str and _is_text(thread)))
            and type(hops) is int
            and hops >= 0
            and (dispatch_mode is None or type(dispatch_mode) is DispatchMode)
        ):
            _check_payload_size(payload)
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
            raise _invalid(exc) from None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AUNMessage:
        """Validate a message given as a dict, raising `InvalidMessageError` on bad input."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _invalid(exc) from None


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
#: The payload class each known ``type`` names: a payload instance of exactly that class is valid as is.
_PAYLOAD_CLASSES: dict[Any, type[BaseModel]] = {
    "text": TextPayload,
    "json": JsonPayload,
    "tool_call": ToolCallPayload,
    "tool_result": ToolResultPayload,
}


#: AIDs recently found valid. The same few senders and recipients recur in message after message;
#: a set lookup is a fraction of a pattern match. Cleared when full (the cost is a re-match).
_KNOWN_AIDS: set[str] = set()
_KNOWN_AIDS_LIMIT = 4096


def _is_aid(value: object) -> bool:
    if type(value) is not str:
        return False
    if value in _KNOWN_AIDS:
        return True
    if len(value) <= MAX_AID_LENGTH and AID_PATTERN.match(value) is not None:
        if len(_KNOWN_AIDS) >= _KNOWN_AIDS_LIMIT:
            _KNOWN_AIDS.clear()
        _KNOWN_AIDS.add(value)
        return True
    return False


def _is_text(value: str | None) -> bool:
    """Whether `value` can be written as UTF-8, as JSON on the wire and in the archive must be.

    A Python string can hold what UTF-8 cannot: a lone surrogate (`"\\ud800"`, which a JSON
    escape can also produce). Such a message would fail at every write, so it is refused where
    it is made. ASCII, the usual case, is told apart without encoding anything.
    """
    if value is None or value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _check_payload_size(payload: BaseModel) -> None:
    """Refuse a payload over `MAX_PAYLOAD_BYTES`, or one that is not valid Unicode text."""
    if (
        isinstance(payload, TextPayload)
        and 6 * len(payload.text) + 512 * len(payload.mentions) < _FAST_PATH_BYTES
        and _is_text(payload.text)
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


def _invalid(exc: ValidationError) -> InvalidMessageError:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return InvalidMessageError(
        f"invalid message: {where or 'message'}: {first.get('msg')}", field=where or None
    )


def payload_from_json(data: str | bytes | dict[str, Any]) -> Payload:
    """Validate a payload on its own (used by transports that carry payload and envelope separately)."""
    raw = json.loads(data) if isinstance(data, str | bytes) else data
    try:
        return _PayloadHolder.model_validate({"payload": raw}).payload
    except ValidationError as exc:
        raise _invalid(exc) from None


class _PayloadHolder(BaseModel):
    payload: Payload
