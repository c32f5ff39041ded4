"""Topic routing with autogen-core's subscription semantics, indexed for many subscriptions.

autogen-core's `SubscriptionManager` scans every subscription on every add and rebuilds its table
for every topic seen so far, so registering *n* agents costs O(n²): 100,000 AIDs, each with its inbox
subscription, would take hours. `SubscriptionIndex` gives the same answers (same recipients,
same order, duplicates kept, the same errors) with a dictionary for the common case:

* subscriptions that behave exactly like `TypeSubscription` (it or a subclass that changes none
  of `is_match`/`map_to_agent`/`__eq__`, such as `DefaultSubscription`) are found by topic
  type in O(1);
* every other subscription (`TypePrefixSubscription`, user-defined ones) is asked `is_match`;
* the recipients of recently published topics are kept in a bounded cache, cleared on any change.

**The inbox rule.** An AUN runtime subscribes each AID to its own inbox topic with the same
shape of subscription: `TypeSubscription("aun.inbox.<aid>", "<aid>", id="aun.inbox.<aid>")`.
Kept as objects, a million of them cost about 200 bytes each (the subscription, its two strings,
two dictionary entries). An index made with an `inbox_prefix` keeps a subscription of exactly
that shape as its agent type alone, in one dictionary: the topic `<prefix><aid>` reaches `<aid>`
by the rule. The rule is only a way of storing them: such a subscription is still listed (as an equal
`TypeSubscription` made when asked), found equal to its original, and removed by its id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autogen_core import AgentId, Subscription, TopicId, TypeSubscription

__all__ = ["ROUTE_CACHE_SIZE", "SubscriptionIndex"]

#: Topics whose recipient lists are kept. A publish to a cached topic costs one dictionary lookup;
#: past this many topics the cache starts over (a miss costs one more lookup and the AgentIds).
ROUTE_CACHE_SIZE = 4096


def _is_plain_type_subscription(subscription: Subscription) -> bool:
    cls = type(subscription)
    return (
        isinstance(subscription, TypeSubscription)
        and cls.is_match is TypeSubscription.is_match
        and cls.map_to_agent is TypeSubscription.map_to_agent
        and cls.__eq__ is TypeSubscription.__eq__
    )


class SubscriptionIndex:
    """The subscriptions of one runtime, and the agents a topic reaches.

    Kept small per subscription (a runtime may hold one per AID for a million AIDs): a topic type
    or an id with one subscription maps to it directly, and only a second one makes a list; inbox
    subscriptions are kept by the inbox rule (see the module docstring).
    Recipients come in subscription order among plain `TypeSubscription` matches (an inbox
    subscription by the rule first: it is kept by the rule only when it is the first subscription
    to its topic type), then among the others (autogen-core interleaves the two by age; each agent
    still gets every match, and its own messages in order).

    Args:
        inbox_prefix: the topic type prefix of the inbox rule (`aun.inbox.` in an AUN runtime's
            core); None keeps every subscription as an object.
    """

    __slots__ = ("_by_id", "_by_topic_type", "_cache", "_cache_without", "_inbox_prefix", "_inboxes", "_others")

    def __init__(self, inbox_prefix: str | None = None) -> None:
        self._by_id: dict[str, Subscription | list[Subscription]] = {}
        self._by_topic_type: dict[str, TypeSubscription | list[TypeSubscription]] = {}
        self._others: list[Subscription] = []
        self._inbox_prefix = inbox_prefix
        # The agent types subscribed to their inbox topic by the rule, each mapped to itself: a
        # lookup by a type cut out of a topic returns the string the registration gave, so the
        # AgentIds made here (and what is filed under them, such as an evicted agent's state)
        # share it instead of holding a copy each. In registration order.
        self._inboxes: dict[str, str] = {}
        self._cache: dict[TopicId | str, tuple[AgentId, ...]] = {}
        self._cache_without: dict[tuple[str, str, str] | tuple[TopicId, AgentId], tuple[AgentId, ...]] = {}

    @property
    def subscriptions(self) -> Sequence[Subscription]:
        """Every subscription: those kept as objects in the order they were added, then those kept
        by the inbox rule (each an equal `TypeSubscription`, made now)."""
        listed = [s for entry in self._by_id.values() for s in _as_list(entry)]
        return listed + [self._inbox_subscription(agent_type) for agent_type in self._inboxes]

    def __len__(self) -> int:
        return sum(len(_as_list(entry)) for entry in self._by_id.values()) + len(self._inboxes)

    def add(self, subscription: Subscription) -> None:
        """Add a subscription.

        Raises:
            ValueError: an equal subscription is already there (as autogen-core raises).
        """
        if self._exists(subscription):
            raise ValueError("Subscription already exists")
        if self._by_rule(subscription):
            assert isinstance(subscription, TypeSubscription)
            self._inboxes[subscription.agent_type] = subscription.agent_type
        else:
            _put(self._by_id, subscription.id, subscription)
            if _is_plain_type_subscription(subscription):
                assert isinstance(subscription, TypeSubscription)
                _put(self._by_topic_type, subscription.topic_type, subscription)
            else:
                self._others.append(subscription)
        self._routes_changed()

    def remove(self, subscription_id: str) -> None:
        """Remove every subscription with this id.

        Raises:
            ValueError: there is none (as autogen-core raises).
        """
        inbox = self._inbox_of(subscription_id)
        removed = self._by_id.pop(subscription_id, None)
        if inbox is None and removed is None:
            raise ValueError("Subscription does not exist")
        if inbox is not None:
            del self._inboxes[inbox]
        for subscription in _as_list(removed):
            if isinstance(subscription, TypeSubscription) and _is_plain_type_subscription(subscription):
                _drop(self._by_topic_type, subscription.topic_type, subscription)
            else:
                self._others.remove(subscription)
        self._routes_changed()

    def _routes_changed(self) -> None:
        """A subscription came or went: every cached answer may be wrong now."""
        self._cache.clear()
        self._cache_without.clear()

    def recipients(self, topic: TopicId) -> tuple[AgentId, ...]:
        """The agents a publish on `topic` reaches (duplicates kept, as in autogen-core)."""
        # A topic with the source "default" (every AUN topic) is cached under its type string,
        # whose hash Python keeps: a TopicId is hashed by a Python-level dataclass method.
        key: TopicId | str = topic.type if topic.source == "default" else topic
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        exact = self._by_topic_type.get(topic.type)
        matched: list[Subscription] = [] if exact is None else list(_as_list(exact))
        if self._others:
            matched += [s for s in self._others if s.is_match(topic)]
        found = tuple(s.map_to_agent(topic) for s in matched)
        inbox = self._inbox_of(topic.type)
        if inbox is not None:
            found = (AgentId(inbox, topic.source), *found)  # as TypeSubscription.map_to_agent maps it
        if len(self._cache) >= ROUTE_CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = found
        return found

    def recipients_without(self, topic: TopicId, sender: AgentId) -> tuple[AgentId, ...]:
        """The recipients of a publish on `topic` by `sender`: a publish is never delivered back
        to its sender (as in autogen-core). Kept per (topic, sender), so a group post compares
        AgentIds once, not once per member."""
        # Keyed by strings, whose hashes Python keeps, for a topic of the source "default" (every AUN
        # topic): a TopicId and an AgentId are hashed by Python-level methods, once per group copy.
        key: tuple[str, str, str] | tuple[TopicId, AgentId] = (
            (topic.type, sender.type, sender.key) if topic.source == "default" else (topic, sender)
        )
        cached = self._cache_without.get(key)
        if cached is None:
            cached = tuple(agent for agent in self.recipients(topic) if agent != sender)
            if len(self._cache_without) >= ROUTE_CACHE_SIZE:
                self._cache_without.clear()
            self._cache_without[key] = cached
        return cached

    def _by_rule(self, subscription: Subscription) -> bool:
        """Whether `subscription` is an inbox subscription the rule can keep: exactly a
        `TypeSubscription` of the inbox shape, and the first subscription to its topic type (so
        that recipients keep their order)."""
        prefix = self._inbox_prefix
        return (
            prefix is not None
            and type(subscription) is TypeSubscription
            and subscription.id == subscription.topic_type
            and len(subscription.topic_type) == len(prefix) + len(subscription.agent_type)
            and subscription.topic_type.startswith(prefix)
            and subscription.topic_type.endswith(subscription.agent_type)
            and subscription.topic_type not in self._by_topic_type
        )

    def _inbox_of(self, topic_type: str) -> str | None:
        """The agent type the inbox rule subscribes to `topic_type` (also its subscription id), if any."""
        prefix = self._inbox_prefix
        if prefix is None or not self._inboxes or not topic_type.startswith(prefix):
            return None
        return self._inboxes.get(topic_type[len(prefix) :])

    def _inbox_subscription(self, agent_type: str) -> TypeSubscription:
        assert self._inbox_prefix is not None
        topic_type = self._inbox_prefix + agent_type
        return TypeSubscription(topic_type, agent_type, id=topic_type)

    def _exists(self, subscription: Subscription) -> bool:
        # autogen-core compares the new subscription with each existing one (``existing == new``).
        # A plain TypeSubscription equals only a TypeSubscription with its id or its two types, so
        # only these candidates can compare equal.
        candidates: list[Subscription] = [*_as_list(self._by_id.get(subscription.id)), *self._others]
        if isinstance(subscription, TypeSubscription):
            candidates += _as_list(self._by_topic_type.get(subscription.topic_type))
        for key in (subscription.id, getattr(subscription, "topic_type", None)):
            inbox = self._inbox_of(key) if isinstance(key, str) else None
            if inbox is not None:
                candidates.append(self._inbox_subscription(inbox))
        return any(existing == subscription for existing in candidates)


def _as_list(entry: Any) -> list[Any]:
    if entry is None:
        return []
    return entry if isinstance(entry, list) else [entry]


def _put(index: dict[str, Any], key: str, item: Any) -> None:
    entry = index.get(key)
    if entry is None:
        index[key] = item
    elif isinstance(entry, list):
        entry.append(item)
    else:
        index[key] = [entry, item]


def _drop(index: dict[str, Any], key: str, item: Any) -> None:
    entry = index[key]
    if isinstance(entry, list):
        entry.remove(item)
        if len(entry) == 1:
            index[key] = entry[0]
    else:
        del index[key]
