"""A group's dispatch mode: what its members are shown, and the wire spellings of each mode.

[`protocols.aun`][protocols.aun] exports the public names; a new mode is added here (see
docs/where-things-live.md, "Adding a group dispatch mode").
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from .errors import InvalidMessageError

__all__ = ["DispatchMode", "dispatch_mode_or_none", "mention_mode_of", "parse_dispatch_mode", "replies_name_the_sender"]


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


def dispatch_mode_or_none(value: Any) -> DispatchMode | None:
    return None if value is None else parse_dispatch_mode(value)
