"""`AUNCore`: what an AUN runtime needs of the autogen-core runtime beneath it.

[`AUNRuntime`][aun_runtime.AUNRuntime] is a facade over an autogen-core `AgentRuntime`, the *core*.
Beyond autogen-core's own protocol (registration, subscriptions, `publish_message`), the facade
needs a few capabilities, declared here once so that a core says what it is rather than being
probed for it:

* whether it **drains mailboxes** itself (runs each agent's messages one at a time from the mailbox
  the facade hands it) or leaves the facade to apply them at delivery;
* three **hooks** ([`AUNCore.attach`][aun_runtime.AUNCore.attach]): where each AID's mailbox comes from, who hears
  that the core holds a mailbox no longer (an evicted agent's: the facade drops it while it is at
  rest, so an idle AID keeps none), and who hears of a message the core could not deliver (to
  record it as a dead letter);
* the **archive** it keeps, if it keeps one (a distributed worker journals into it), the
  **directory** of AIDs and groups held by other processes, if there are any, and the **mailbox
  options** it was given, if it was given any;
* its **lifecycle**: start (a worker's start connects to its host, so it may be awaited), idle, stop
  when idle, stop, close;
* **publishing a group post's copies** in one call ([`AUNCore.publish_copies`][aun_runtime.AUNCore.publish_copies]), the one
  way the fan-out publishes them. A core without a batch form of its own takes
  `PublishesCopiesOneByOne`'s: a `publish_message` per copy, in order.

Three cores implement it: [`AUNActorRuntime`][aun_runtime.AUNActorRuntime] (the default),
[`AUNSingleThreadedRuntime`][aun_runtime.AUNSingleThreadedRuntime] (autogen-core's own runtime with AUN rules) and the
distributed worker ([`aun_runtime.distributed.WorkerRuntime`][aun_runtime.distributed.WorkerRuntime]).
`InProcessCore` is what the two cores of one process say of themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from autogen_core import AgentId, AgentRuntime, TopicId

from ._mailbox import Mailbox, MailboxOptions

if TYPE_CHECKING:
    from ..storage._archive import Archive
    from ._directory import Directory

__all__ = [
    "AUNCore",
    "InProcessCore",
    "MailboxProvider",
    "MailboxReleasedHook",
    "PublishesCopiesOneByOne",
    "UndeliverableHook",
]

#: Gives the mailbox of an agent (None: not one the facade knows; the core makes its own).
MailboxProvider: TypeAlias = Callable[[AgentId], Mailbox | None]
#: Hears that the core no longer holds the mailbox it was given for an agent (the agent left memory
#: with nothing pending); the core asks the provider again if a message comes.
MailboxReleasedHook: TypeAlias = Callable[[AgentId, Mailbox], None]
#: Hears of a message the core could not deliver to an agent, and why.
UndeliverableHook: TypeAlias = Callable[[AgentId, Any, BaseException], None]


@runtime_checkable
class AUNCore(AgentRuntime, Protocol):
    """An autogen-core `AgentRuntime` that an [`AUNRuntime`][aun_runtime.AUNRuntime] can run on."""

    @property
    def drains_mailboxes(self) -> bool:
        """True if the core runs each agent's messages one at a time from the facade's mailboxes."""
        ...

    @property
    def archive(self) -> Archive | None:
        """The archive the core keeps itself (the facade then uses it), or None."""
        ...

    @property
    def directory(self) -> Directory | None:
        """The AIDs and groups held by other processes, or None for a core of one process."""
        ...

    @property
    def mailbox_options(self) -> MailboxOptions | None:
        """The mailbox options this core was given (the facade then uses them), or None."""
        ...

    def attach(
        self,
        *,
        mailbox_provider: MailboxProvider | None = None,
        on_undeliverable: UndeliverableHook | None = None,
        on_mailbox_released: MailboxReleasedHook | None = None,
    ) -> None:
        """Plug in the facade's mailboxes, its dead-letter hook and the hook that hears of mailboxes
        the core holds no longer (a core that never drops agents never calls it)."""
        ...

    def start(self) -> Awaitable[None] | None:
        """Start delivering (awaitable for a core whose start connects somewhere)."""
        ...

    async def idle(self) -> None:
        """Return once every message published so far, and all it caused, has been handled."""
        ...

    async def stop_when_idle(self) -> None:
        """Stop once idle."""
        ...

    async def stop(self) -> None:
        """Stop now; what is still queued is reported to the undeliverable hook."""
        ...

    async def close(self) -> None:
        """Stop and release what the core holds (agents' instances, connections)."""
        ...

    async def publish_copies(
        self, message: Any, topic_ids: Sequence[TopicId], *, sender: AgentId | None = None, message_id: str
    ) -> None:
        """Publish `message` on each of `topic_ids` in turn, as that many `publish_message` calls
        would (the copies of one group post, each on its member's inbox topic)."""
        ...


class PublishesCopiesOneByOne:
    """The default [`AUNCore.publish_copies`][aun_runtime.AUNCore.publish_copies], for a core
    without a batch form: one `publish_message` per copy, in the order given."""

    async def publish_copies(
        self, message: Any, topic_ids: Sequence[TopicId], *, sender: AgentId | None = None, message_id: str
    ) -> None:
        """Publish `message` on each of `topic_ids` in turn."""
        publish = self.publish_message  # type: ignore[attr-defined]  # the core this is mixed into
        for topic_id in topic_ids:
            await publish(message, topic_id, sender=sender, message_id=message_id)


class InProcessCore:
    """What a core whose agents all live in this process says of itself to the facade: it keeps no
    archive of its own and has no directory of AIDs held elsewhere."""

    @property
    def archive(self) -> None:
        """None: the facade keeps the archive."""
        return None

    @property
    def directory(self) -> None:
        """None: every AID and group is in this process."""
        return None
