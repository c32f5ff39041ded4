"""Topic routing with autogen-core's subscription semantics, indexed for many subscriptions.

autogen-core's ``SubscriptionManager`` scans every subscription on every add and rebuilds its table
for every topic seen so far, so registering *n* agents costs O(n²): 100,000 AIDs, each with its inbox
subscription, would take hours. :class:`SubscriptionIndex` gives the same answers (same recipients,
same order, duplicates kept, the same errors) with a dictionary for the common case:

* subscriptions that behave exactly like ``TypeSubscription`` (it or a subclass that changes none
  of ``is_match``/``map_to_agent``/``__eq__``, such as ``DefaultSubscription``) are found by topic
  type in O(1);
* every other subscription (``TypePrefixSubscription``, user-defined ones) is asked ``is_match``;
* the recipients of recently published topics are kept in a bounded cache, cleared on any change.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    """The subscriptions of one runtime, and the agents a topic reaches."""

    __slots__ = ("_by_id", "_by_topic_type", "_cache", "_order", "_others", "_seq")

    def __init__(self) -> None:
        self._seq = 0
        self._order: dict[int, int] = {}  # id(subscription) -> the order it was added in
        self._by_id: dict[str, list[Subscription]] = {}
        self._by_topic_type: dict[str, list[TypeSubscription]] = {}
        self._others: list[Subscription] = []
        self._cache: dict[TopicId, tuple[AgentId, ...]] = {}

    @property
    def subscriptions(self) -> Sequence[Subscription]:
        """Every subscription, in the order it was added."""
        everything = [s for subs in self._by_id.values() for s in subs]
        everything.sort(key=lambda s: self._order[id(s)])
        return everything

    def add(self, subscription: Subscription) -> None:
        """Add a subscription.

        Raises:
            ValueError: an equal subscription is already there (as autogen-core raises).
        """
        if self._exists(subscription):
            raise ValueError("Subscription already exists")
        self._seq += 1
        self._order[id(subscription)] = self._seq
        self._by_id.setdefault(subscription.id, []).append(subscription)
        if _is_plain_type_subscription(subscription):
            assert isinstance(subscription, TypeSubscription)
            self._by_topic_type.setdefault(subscription.topic_type, []).append(subscription)
        else:
            self._others.append(subscription)
        self._cache.clear()

    def remove(self, subscription_id: str) -> None:
        """Remove every subscription with this id.

        Raises:
            ValueError: there is none (as autogen-core raises).
        """
        removed = self._by_id.pop(subscription_id, None)
        if not removed:
            raise ValueError("Subscription does not exist")
        for subscription in removed:
            del self._order[id(subscription)]
            if isinstance(subscription, TypeSubscription) and _is_plain_type_subscription(subscription):
                same_type = self._by_topic_type[subscription.topic_type]
                same_type.remove(subscription)
                if not same_type:
                    del self._by_topic_type[subscription.topic_type]
            else:
                self._others.remove(subscription)
        self._cache.clear()

    def recipients(self, topic: TopicId) -> tuple[AgentId, ...]:
        """The agents a publish on ``topic`` reaches, in subscription order (duplicates kept)."""
        cached = self._cache.get(topic)
        if cached is not None:
            return cached
        matched: list[Subscription] = list(self._by_topic_type.get(topic.type, ()))
        if self._others:
            scanned = [s for s in self._others if s.is_match(topic)]
            if scanned:
                matched += scanned
                matched.sort(key=lambda s: self._order[id(s)])
        found = tuple(s.map_to_agent(topic) for s in matched)
        if len(self._cache) >= ROUTE_CACHE_SIZE:
            self._cache.clear()
        self._cache[topic] = found
        return found

    def _exists(self, subscription: Subscription) -> bool:
        # autogen-core compares the new subscription with each existing one (``existing == new``);
        # only the candidates that can compare equal are looked at here.
        # A plain TypeSubscription equals only a TypeSubscription with its id or its two types, so
        # the others need a look only when the new one is a TypeSubscription too.
        candidates: list[Subscription] = [*self._by_id.get(subscription.id, ()), *self._others]
        if isinstance(subscription, TypeSubscription):
            candidates += self._by_topic_type.get(subscription.topic_type, ())
        return any(existing == subscription for existing in candidates)
