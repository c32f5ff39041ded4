"""`Placement`: the one object a runtime asks where an AID lives and who a group's members are.

Three parts answer together, each behind a protocol of its own:

* the runtime's **endpoints**: an AID registered in this runtime lives `HERE`;
* a **directory** (`aun_runtime.delivery._directory.Directory`): the in-process `LocalGroups`, or a distributed
  worker's view of its cluster, which knows the AIDs other workers hold (`ELSEWHERE`, or `AWAY`
  while their worker is gone) and keeps the groups;
* an optional **outbound route** (`aun_runtime.delivery._route.OutboundRoute`, a gateway agent): what
  nobody here or in the cluster holds is on the `NETWORK`.

What is left lives `NOWHERE`, or is `KEPT` by a cluster that delivers it once a worker registers
the AID. The send path (`aun_runtime.delivery._send`), the group fan-out (`aun_runtime.delivery._fan_out`) and the
facade ask this object and act on its answer; none of them looks at which parts exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from protocols.aun import AUNMessage, DispatchMode, aid_domain

from ..base._errors import NoRouteError, UndeliverableError, UnknownAIDError
from ..base._groups import GroupInfo
from ._directory import AIDStatus, Directory
from ._local_groups import LocalGroups

if TYPE_CHECKING:
    from ._endpoint import Endpoint
    from ._route import OutboundRoute

__all__ = ["Placement", "Where"]


class Where(StrEnum):
    """Where an AID lives, as the sending runtime sees it."""

    HERE = "here"  #: registered in this runtime
    ELSEWHERE = "elsewhere"  #: another process of this cluster holds it now
    AWAY = "away"  #: another process held it and went away: what is sent waits for it
    NETWORK = "network"  #: nobody here holds it, and an outbound route takes it
    KEPT = "kept"  #: nobody holds it yet; the cluster keeps what is sent until a worker does
    NOWHERE = "nowhere"  #: nobody: a message to it is a dead letter


#: Where an AID lives in this runtime's cluster (published to, or kept for it there).
IN_CLUSTER = frozenset({Where.HERE, Where.ELSEWHERE, Where.AWAY})


class Placement:
    """Where AIDs live and who groups' members are, for one runtime.

    Args:
        endpoints: the runtime's local AIDs (shared, not copied: registration adds to it).
        directory: the core's directory of AIDs and groups held by other processes, or None for a
            core of one process (the groups then live here, in a `LocalGroups`).
        domain: the local domain.
    """

    def __init__(self, endpoints: Mapping[str, Endpoint], directory: Directory | None, domain: str) -> None:
        self.endpoints = endpoints
        self.directory: Directory = LocalGroups() if directory is None else directory
        self.domain = domain
        #: Where what nobody here holds goes (a gateway agent), or None: it is a dead letter.
        self.route: OutboundRoute | None = None

    # -- AIDs --------------------------------------------------------------------------------------

    def where(self, aid: str) -> Where:
        """Where `aid` lives now."""
        if aid in self.endpoints:
            return Where.HERE
        status = self.directory.aid_status(aid)
        if status is AIDStatus.HELD:
            return Where.ELSEWHERE
        if status is AIDStatus.AWAY:
            return Where.AWAY
        if self.route is not None:
            return Where.NETWORK
        if self.directory.keeps_undeliverable and aid_domain(aid) == self.domain:
            return Where.KEPT
        return Where.NOWHERE

    def no_agent(self, aid: str) -> UndeliverableError:
        """The error for a message to `aid`, which lives nowhere."""
        if aid_domain(aid) == self.domain:
            return UnknownAIDError(f"no agent {aid} is registered in this runtime")
        return NoRouteError(f"no gateway route to {aid}: it is outside the local domain {self.domain!r}")

    async def forward(self, message: AUNMessage, recipient: str | None) -> None:
        """Hand `message` to the outbound route (asked only of what lives on the `NETWORK`).

        Raises:
            UndeliverableError: the route refused it.
        """
        route = self.route
        assert route is not None, "forward() is for what lives on the network"
        await route.forward(message, recipient)

    async def ping(self, aid: str) -> bool:
        """Whether `aid` can be reached now: asked of the route for what lives on the network.

        Raises:
            NoRouteError: `aid` is outside the local domain and no gateway carries it.
        """
        where = self.where(aid)
        if where is Where.HERE or where is Where.ELSEWHERE:
            return True
        if where is Where.NETWORK:
            route = self.route
            assert route is not None  # what lives on the network has a route
            return await route.ping(aid)
        if aid_domain(aid) == self.domain:
            return False
        raise self.no_agent(aid)

    # -- groups ------------------------------------------------------------------------------------

    def group(self, group_id: str) -> GroupInfo | None:
        """The group as it stands now, if this runtime (or its cluster) holds it."""
        return self.directory.group(group_id)

    def group_where(self, group_id: str) -> Where:
        """Where a group lives: `HERE` (this runtime or its cluster), on the `NETWORK`, or `NOWHERE`."""
        if self.directory.group(group_id) is not None:
            return Where.HERE
        return Where.NETWORK if self.route is not None else Where.NOWHERE

    def groups(self) -> list[GroupInfo]:
        directory = self.directory
        return [info for group_id in directory.group_ids() if (info := directory.group(group_id)) is not None]

    async def create_group(self, group_id: str, members: Sequence[str], dispatch_mode: DispatchMode) -> GroupInfo:
        return await self.directory.create_group(group_id, members, dispatch_mode)

    async def add_member(self, group_id: str, aid: str) -> None:
        await self.directory.add_member(group_id, aid)

    async def remove_member(self, group_id: str, aid: str) -> None:
        await self.directory.remove_member(group_id, aid)

    async def set_dispatch_mode(self, group_id: str, dispatch_mode: DispatchMode) -> None:
        await self.directory.set_dispatch_mode(group_id, dispatch_mode)

    def delivery_order(self, group_id: str) -> list[str]:
        return self.directory.delivery_order(group_id)

    def registered(self, aid: str) -> None:
        """An agent for `aid` was registered in this runtime."""
        self.directory.registered(aid)

    def next_seq(self, group_id: str) -> int | None:
        return self.directory.next_seq(group_id)

    def was_member(self, group_id: str, aid: str, seq: int) -> bool:
        return self.directory.was_member(group_id, aid, seq)
