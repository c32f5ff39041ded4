"""Stand-in model for observers: follows the observer protocol's behaviour table by simple rules."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aun_runtime.models import ModelRequest, ScriptedChatCompletionClient

__all__ = ["DEMO_OBSERVERS", "ObserverProfile", "ObserverStandIn", "observer_group"]


@dataclass(frozen=True)
class ObserverProfile:
    """What one observer knows: the words that make a message its business, what it says when asked,
    and what it adds when a conversation it is in goes on."""

    topics: tuple[str, ...]
    answer: str
    follow_up: str = "Happy to help further if needed."
    says_unknown: str = "That is outside what I know, sorry."


@dataclass
class ObserverStandIn:
    """Follows the observer protocol's behaviour table, for the observers named in `profiles`.

    Decision order: addressed -> reply; addressed to someone else or off its topics -> silent;
    continuing a conversation it is in -> reply; the point was just made by someone else -> silent;
    on topic but nothing asked (unsure) -> silent; an open question on its topic -> reply.
    """

    profiles: dict[str, ObserverProfile] = field(default_factory=dict)

    def __call__(self, request: ModelRequest) -> str:
        aid_match = re.match(r"You are (\S+), a member of a group chat", request.system)
        if aid_match is None:
            return "__SILENT__ not an observer prompt"
        profile = self.profiles.get(aid_match.group(1))
        if profile is None:
            return "__SILENT__ nothing I know about"
        context, new = _split(request.last_text)
        addressing = re.search(r", (addressed to [^:]+):\n", request.last_text)
        addressed_to = addressing.group(1) if addressing else ""
        text = new.lower()
        on_topic = any(topic in text for topic in profile.topics)
        if addressed_to in ("addressed to you", "addressed to everyone"):
            return "__REPLY__ " + (profile.answer if on_topic else profile.says_unknown)
        if not on_topic or addressed_to != "addressed to no one in particular":
            return "__SILENT__ not my conversation"
        if _continues(context, request):
            return "__REPLY__ " + profile.follow_up
        others = [line for line in context[-4:] if not line.startswith("[you]")]
        said = any(profile.answer.lower() in line.lower() for line in others)
        if said or profile.answer.lower() in text:
            return "__SILENT__ someone just made that point"
        if "?" not in new:
            return "__SILENT__ on my topic, but nothing is being asked"
        return "__REPLY__ " + profile.answer


def _continues(context: list[str], request: ModelRequest) -> bool:
    """True if the new message comes from whoever this observer answered last, right after it did."""
    sender = re.search(r"\n\nNew message from (\S+) in ", request.last_text)
    mine = [n for n, line in enumerate(context) if line.startswith("[you]")]
    if sender is None or not mine or mine[-1] < len(context) - 2 or mine[-1] == 0:
        return False
    return context[mine[-1] - 1].startswith(f"[{sender.group(1)}]")


def _split(prompt: str) -> tuple[list[str], str]:
    head, _, new = prompt.partition("\n\nNew message from ")
    context = [line for line in head.splitlines()[1:] if line.startswith("[")]
    return context, new.split(":\n", 1)[-1]


#: The cast of the demo and the observer notebook.
DEMO_OBSERVERS = {
    "db.local": ObserverProfile(
        topics=("query", "database", "index", "sql"),
        answer="The orders query scans the whole table; an index on orders.created_at will fix it.",
        follow_up="Yes, create it concurrently so writes are not blocked.",
    ),
    "ops.local": ObserverProfile(
        topics=("deploy", "release", "rollout"),
        answer="The deploy is on Friday at 10:00.",
        follow_up="I will post in here when it starts.",
    ),
    "sre.local": ObserverProfile(
        topics=("deploy", "release", "rollout", "outage"),
        answer="The deploy is on Friday at 10:00.",
        follow_up="I will watch the dashboards during it.",
    ),
}


def observer_group() -> ScriptedChatCompletionClient:
    """The stand-in for the observer demo and notebook."""
    return ScriptedChatCompletionClient(ObserverStandIn(dict(DEMO_OBSERVERS)))
