"""agent.md cards, parsed, checked and rendered: what [`aun_runtime.agentmd`][aun_runtime.agentmd] exports.

In the base room because the delivery, the gateway, the network and the console all read cards;
the public module documents the format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from protocols.aun import validate_aid
from protocols.errors import AUNError, InvalidAIDError

__all__ = [
    "AGENT_TYPES",
    "MAX_AGENT_MD_BYTES",
    "AgentCard",
    "AgentMDError",
    "parse_agent_md",
    "read_front_matter",
    "render_agent_md",
]

#: The agent.md size limit of the AUN specification.
MAX_AGENT_MD_BYTES = 4096
#: The agent types the specification knows.
AGENT_TYPES = ("human", "assistant", "avatar", "openclaw", "codeagent")
MAX_DESCRIPTION_CHARS = 100
#: The front-matter field in which a card declares its AUN behaviour mode (``autonomous``, the only
#: one AUN knows: doc 13, receiver duties, "declare the mode in the agent's metadata").
BEHAVIOR_MODE_FIELD = "behavior_mode"
#: Where the signature block the AUN client appends to a card starts (what follows is not the card).
SIGNATURE_MARKER = "<!-- AUN-SIGNATURE"
_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_CORE_FIELDS = ("aid", "name", "type", "version", "description", "tags")


class AgentMDError(AUNError):
    """An agent.md document is invalid. `field` names the field at fault (None for the document)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"agent.md: {field}: {message}" if field else f"agent.md: {message}")
        self.field = field


@dataclass(frozen=True)
class AgentCard:
    """A validated agent.md document."""

    aid: str
    name: str
    type: str
    version: str
    description: str
    tags: tuple[str, ...] = ()
    body: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate(self)


def read_front_matter(document: str) -> tuple[dict[str, Any], str]:
    """Split an agent.md document into its front matter (the YAML mapping) and its Markdown body,
    checking nothing else (a gateway storing cards of any type reads them this way).

    Raises:
        AgentMDError: there is no front matter, it is not valid YAML, or it is not a mapping.
    """
    match = _FRONT_MATTER.match(document)
    if match is None:
        raise AgentMDError("the document must start with YAML front matter between two '---' lines")
    front, body = match.groups()
    try:
        meta = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        raise AgentMDError(f"the front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise AgentMDError("the front matter must be a mapping of fields")
    return meta, body


def parse_agent_md(text: str | bytes) -> AgentCard:
    """Parse and validate an agent.md document.

    Raises:
        AgentMDError: the document is too large, has no front matter, or a field is missing or wrong.
    """
    raw = text.encode() if isinstance(text, str) else text
    if len(raw) > MAX_AGENT_MD_BYTES:
        raise AgentMDError(f"the document is {len(raw)} bytes; the limit is {MAX_AGENT_MD_BYTES}")
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AgentMDError(f"the document is not UTF-8 ({exc.reason})") from None
    meta, body = read_front_matter(source)
    for name in _CORE_FIELDS[:5]:
        if name not in meta or meta[name] in (None, ""):
            raise AgentMDError("is required", field=name)
        if not isinstance(meta[name], str):
            raise AgentMDError(f"must be a string, not {type(meta[name]).__name__}", field=name)
    tags = meta.get("tags", [])
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise AgentMDError("must be a list of strings", field="tags")
    return AgentCard(
        aid=meta["aid"],
        name=meta["name"],
        type=meta["type"],
        version=meta["version"],
        description=meta["description"],
        tags=tuple(tags),
        body=body,
        extra={k: v for k, v in meta.items() if k not in _CORE_FIELDS},
    )


def render_agent_md(card: AgentCard) -> str:
    """Render a card as an agent.md document (checked against the size limit).

    Raises:
        AgentMDError: the rendered document is over `MAX_AGENT_MD_BYTES`.
    """
    meta: dict[str, Any] = {
        "aid": card.aid,
        "name": card.name,
        "type": card.type,
        "version": card.version,
        "description": card.description,
    }
    if card.tags:
        meta["tags"] = list(card.tags)
    meta.update(card.extra)
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip("\n")
    text = f"---\n{front}\n---\n{card.body}"
    size = len(text.encode())
    if size > MAX_AGENT_MD_BYTES:
        raise AgentMDError(f"the rendered document is {size} bytes; the limit is {MAX_AGENT_MD_BYTES}")
    return text


def _validate(card: AgentCard) -> None:
    try:
        validate_aid(card.aid)
    except InvalidAIDError as exc:
        raise AgentMDError(str(exc), field="aid") from None
    if not card.name.strip():
        raise AgentMDError("must not be empty", field="name")
    if card.type not in AGENT_TYPES:
        raise AgentMDError(f"{card.type!r} is not one of {', '.join(AGENT_TYPES)}", field="type")
    if not _SEMVER.match(card.version):
        raise AgentMDError(
            f"{card.version!r} is not a MAJOR.MINOR.PATCH version such as 1.0.0", field="version"
        )
    if len(card.description) > MAX_DESCRIPTION_CHARS:
        raise AgentMDError(
            f"is {len(card.description)} characters; the limit is {MAX_DESCRIPTION_CHARS}",
            field="description",
        )
