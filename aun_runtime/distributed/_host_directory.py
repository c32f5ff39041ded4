"""The host's directory: which worker owns which name, AID, service AID and group, and the state
file that keeps it across restarts.

An AID belongs to the worker that registered it until that worker leaves: *held* while that
worker's stream is open, *away* when it vanished without leaving. A service AID lists its
instances. A group has a holder, a mode and members. What is remembered (given a state file, see
`._host_state`) is ownership only, nothing of what is live: a restarted host starts with
everything away until its owner is back.

Apart from the servicer because it is the host's data, not its calls: the servicer, registration
and the data streams ask it and change it through the methods below, and every worker receives
it as a snapshot and then as changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from protocols.aun import DispatchMode, validate_aid, validate_group_id
from protocols.errors import AUNError

from ._errors import HostStateError
from ._host_records import AWAY, HELD, Refusal
from ._host_state import HostState, Snapshot
from ._identity import Identities
from ._service_routing import ServiceRoute

__all__ = ["GroupEntry", "HostDirectory", "check_group_request"]

logger = logging.getLogger("aun_runtime.distributed")

_Status = grpc.StatusCode
_GROUP_OPS = frozenset({"create", "announce", "add", "remove", "mode"})
_MODES = frozenset(str(mode) for mode in DispatchMode)


@dataclass
class GroupEntry:
    """A group in the directory: the worker that holds it, its dispatch mode, its members."""

    holder: str
    mode: str
    members: set[str] = field(default_factory=set)

    def view(self) -> dict[str, Any]:
        return {"members": sorted(self.members), "mode": self.mode, "holder": self.holder}


class HostDirectory:
    """Who owns what, and the state file it is written to. The dicts are never replaced, only
    changed, so a part that holds one sees every change."""

    def __init__(self, state: HostState | None = None) -> None:
        self.state = state
        self.aids: dict[str, tuple[str, str, str]] = {}  # aid -> (worker, client id, held|away)
        self.groups: dict[str, GroupEntry] = {}
        self.services: dict[str, ServiceRoute] = {}  # service aid -> its instances and routing
        self.identities = Identities()
        if state is not None:
            try:
                self._restore(state.loaded)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise HostStateError(
                    f"{state.path} holds an entry this host cannot read ({exc!r})", value=state.given
                ) from None

    def _restore(self, known: Snapshot) -> None:
        """Start from a state file: everything in it is away (on no stream) until its owner is back."""
        self.identities = Identities(known["workers"])
        self.aids.update((aid, (str(worker), "", AWAY)) for aid, worker in known["aids"].items())
        self.groups.update(
            (gid, GroupEntry(g["holder"], g["mode"], set(g["members"]))) for gid, g in known["groups"].items()
        )
        self.services.update(
            (aid, ServiceRoute(s["policy"], bytes.fromhex(s["secret"]), dict.fromkeys(s["instances"])))
            for aid, s in known["services"].items()
        )

    # -- remembering -------------------------------------------------------------------------------

    def _memory(self) -> Snapshot:
        """What the state file keeps: who owns what, nothing of what is live."""
        return {
            "workers": self.identities.digests(),
            "aids": {aid: worker for aid, (worker, _, _) in sorted(self.aids.items())},
            "services": {
                aid: {"policy": s.policy, "secret": s.secret.hex(), "instances": sorted(s.instances)}
                for aid, s in sorted(self.services.items())
            },
            "groups": {
                gid: {"holder": g.holder, "mode": g.mode, "members": sorted(g.members)} for gid, g in sorted(self.groups.items())
            },
        }

    async def remember(self) -> None:
        """Write what changed to the state file (if there is one) before the change is answered."""
        if self.state is None:
            return
        try:
            await self.state.save(self._memory)
        except HostStateError as exc:
            logger.error("host: %s", exc)
            raise Refusal(_Status.UNAVAILABLE, "the host cannot write its state file now; try again") from None

    def close(self) -> None:
        """Let go of the state file (another host may use it from now on)."""
        if self.state is not None:
            self.state.close()

    # -- what workers are shown --------------------------------------------------------------------

    def service_entry(self, aid: str) -> list[Any]:
        """A service AID in the directory: held while any instance is live, with its instances."""
        service = self.services[aid]
        return ["service", HELD if service.live() else AWAY, service.view()]

    def snapshot(self) -> dict[str, Any]:
        """The whole directory, as a worker receives it after its hello."""
        return {
            "aids": {aid: [w, status] for aid, (w, _, status) in self.aids.items()}
            | {aid: self.service_entry(aid) for aid in self.services},
            "groups": {gid: g.view() for gid, g in self.groups.items()},
        }

    def view(self) -> dict[str, Any]:
        """The directory as the Stats call shows it."""
        return {
            "aids": {aid: [w, s] for aid, (w, _, s) in sorted(self.aids.items())},
            "groups": {gid: g.view() for gid, g in sorted(self.groups.items())},
            "services": {aid: s.view() for aid, s in sorted(self.services.items())},
        }

    # -- changes -----------------------------------------------------------------------------------

    def owns(self, agent_type: str) -> bool:
        """Whether `agent_type` is an AID or a service AID some worker owns."""
        return agent_type in self.aids or agent_type in self.services

    def let_go(self, client_id: str) -> dict[str, Any]:
        """The stream `client_id` closed: what it held is away now. Returns the change."""
        away: dict[str, Any] = {aid: [w, AWAY] for aid, (w, c, _) in self.aids.items() if c == client_id}
        for aid in away:
            w, c, _ = self.aids[aid]
            self.aids[aid] = (w, c, AWAY)
        for aid, service in self.services.items():
            if service.lost(client_id) is not None:
                away[aid] = self.service_entry(aid)
        return away

    def change_group(self, worker: str, request: dict[str, Any], live: Callable[[str], bool]) -> dict[str, Any] | None:
        """Apply a checked Group call (see `check_group_request`) of `worker`; `live(w)` says whether
        worker `w` has a live stream. Returns the call's error answer, or None when the group changed."""
        op, group_id = request["op"], request["group"]
        group = self.groups.get(group_id)
        if op in ("create", "announce"):
            if op == "create" and group is not None and live(group.holder) and group.holder != worker:
                return {"error": "exists", "message": f"group {group_id} already exists (held by worker {group.holder})"}
            if op == "create" and group is not None and group.holder == worker and live(worker):
                return {"error": "exists", "message": f"group {group_id} already exists"}
            self.groups[group_id] = GroupEntry(worker, request["mode"], set(request["members"]))
            logger.info("host: worker %s %s group %s", worker, "created" if op == "create" else "announced", group_id)
        elif group is None:
            return {"error": "unknown", "message": f"no group {group_id!r}; create it with create_group()"}
        elif op == "add":
            group.members.add(request["aid"])
        elif op == "remove":
            group.members.discard(request["aid"])
        else:
            group.mode = request["mode"]
        return None

    def leave(self, worker: str, groups: list[str]) -> tuple[list[str], dict[str, Any], list[str]]:
        """`worker` stops for good: its AIDs, its instances and those of `groups` it holds are
        released, and its name may be bound to another secret. Returns the AIDs released, the
        change of AIDs, and the groups released."""
        released = [aid for aid, (w, _, _) in self.aids.items() if w == worker]
        for aid in released:
            del self.aids[aid]
        changed: dict[str, Any] = dict.fromkeys(released)
        for aid, service in list(self.services.items()):
            if worker in service.instances:
                if service.leave(worker):
                    del self.services[aid]
                    changed[aid] = None
                else:
                    changed[aid] = self.service_entry(aid)
        left = [g for g in groups if g in self.groups and self.groups[g].holder == worker]
        for group_id in left:
            del self.groups[group_id]
        self.identities.forget(worker)
        return released, changed, left


def check_group_request(request: Any) -> None:
    """A Group call, checked before anything is changed: what is pushed to every worker must be
    something every worker can read."""
    if not isinstance(request, dict):
        raise Refusal(_Status.INVALID_ARGUMENT, "a Group call takes a JSON object")
    op = request.get("op")
    if op not in _GROUP_OPS:
        raise Refusal(_Status.INVALID_ARGUMENT, f"unknown group operation {str(op)[:40]!r}; one of {', '.join(sorted(_GROUP_OPS))}")
    try:
        validate_group_id(request.get("group"))  # type: ignore[arg-type]
        if op in ("add", "remove"):
            validate_aid(request.get("aid"))  # type: ignore[arg-type]
        if op in ("create", "announce"):
            members = request.get("members")
            if not isinstance(members, list):
                raise Refusal(_Status.INVALID_ARGUMENT, f"a {op} call lists its members")
            for member in members:
                validate_aid(member)
    except AUNError as exc:
        raise Refusal(_Status.INVALID_ARGUMENT, str(exc)[:200]) from None
    if op in ("create", "announce", "mode") and request.get("mode") not in _MODES:
        raise Refusal(_Status.INVALID_ARGUMENT, f"a group's mode is one of {', '.join(sorted(_MODES))}")
