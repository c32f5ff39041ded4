"""Idle agents: 100,000 AIDs each sent one message, then idle; registration rate, peak and settled RSS, in one run.

Each configuration runs in a fresh process (RSS is per process):

* ``aun_actor``: ``AUNRuntime`` on ``AUNActorRuntime`` with an SQLite archive file. N AIDs are
  registered (one agent type each, as AUN maps an AID), each is sent one message from the
  application's inbox (in rounds of :data:`ROUND`, each awaited). Each agent keeps what it is
  told in an autogen-core ``BufferedChatCompletionContext``, saved with ``save_state``. Instances idle for
  ``--idle-timeout`` seconds are evicted while the run goes on (virtual-actor style), so at any
  moment only the recently addressed ones are in memory; *settled* is measured once every instance
  but the application's inbox has been evicted. Evicted state is kept in memory as JSON
  (``MemoryStateStore``, the default).
* ``aun_actor_sqlite_state``: the same with ``SQLiteStateStore``: evicted state goes to a file.
* ``raw_autogen``: autogen-core's ``SingleThreadedAgentRuntime`` with the same number of agent
  instances of the same agent (a model context each): one agent type with a ``TypeSubscription``,
  one message published to each of N topic sources (in the same rounds), so N instances, which autogen-core never drops (upstream #4893, #5374). (Registering N
  agent *types* as AUN does is not measured on it: its subscription manager compares every new
  subscription with all others, which for 100,000 would take hours.)

Reported per configuration: RSS after setup and before the agents (``base``), the peak RSS, the
settled RSS (after the idle phase and a garbage collection, without returning freed memory to the
OS), bytes per idle agent (settled minus base, over N) and the wall time. The AUN configurations
also report how fast the N AIDs were registered (``registrations_per_s``: `register_agent` calls,
each archived, timed alone); raw autogen-core registers one agent type, so it has no such figure.
Ratios compare the settled figures with raw autogen-core's. Targets: settled under 1 GB, at most
1,000 bytes per idle AID and at least 10,000 registrations a second. Prints one JSON line.

Raw autogen-core is run at every size up to ``--raw-limit`` AIDs (default: all); above it, it is
skipped and the output says so (``"skipped"``), and the ratios are left out.

Usage: ``python bench/idle_agents.py [--agents 100000] [--idle-timeout 1.0] [--raw-limit N] [--only NAME]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autogen_core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    event,
)
from autogen_core.model_context import BufferedChatCompletionContext
from autogen_core.models import UserMessage

from aun_runtime import AUNActorRuntime, AUNAgent, AUNMessage, AUNRuntime, SQLiteStateStore

sys.path.insert(0, str(Path(__file__).parent))
from _memory import MB, peak_rss_bytes, rss_bytes, run_children

#: Messages each agent's model context keeps.
CONTEXT_MESSAGES = 10
#: Bytes an idle AID may cost, settled (a million in under 1 GB with room for the process itself).
BYTES_PER_AID_TARGET = 1000
#: AIDs a runtime should register per second (a million in under two minutes).
REGISTRATIONS_PER_S_TARGET = 10_000
#: Messages sent before the sender waits for them to be handled, as a server answering requests
#: would. One burst of 100,000 would measure 100,000 messages in flight, not 100,000 idle agents.
ROUND = 1000


class Session(AUNAgent):
    """A conversation partner in miniature: keeps what it is told in an autogen-core model context
    (the last ten messages), which is its state."""

    def __init__(self) -> None:
        super().__init__("keeps a conversation")
        self.context = BufferedChatCompletionContext(buffer_size=CONTEXT_MESSAGES)

    @event
    async def on_any(self, message: AUNMessage, ctx: MessageContext) -> None:
        await self.context.add_message(UserMessage(content=message.text or "", source=message.from_aid))

    async def save_state(self) -> Mapping[str, Any]:
        return {"context": await self.context.save_state()}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self.context.load_state(state["context"])


@dataclass
class Hello:
    text: str
    sender: str


class RawSession(RoutedAgent):
    """The same agent for autogen-core's runtime."""

    def __init__(self) -> None:
        super().__init__("keeps a conversation")
        self.context = BufferedChatCompletionContext(buffer_size=CONTEXT_MESSAGES)

    @event
    async def on_hello(self, message: Hello, ctx: MessageContext) -> None:
        await self.context.add_message(UserMessage(content=message.text, source=message.sender))


async def _context_size(context: BufferedChatCompletionContext) -> int:
    return len(await context.get_messages())


async def aun_actor(agents: int, idle_timeout: float) -> dict[str, Any]:
    return await _aun_actor(agents, idle_timeout, durable=False)


async def aun_actor_sqlite_state(agents: int, idle_timeout: float) -> dict[str, Any]:
    return await _aun_actor(agents, idle_timeout, durable=True)


async def _aun_actor(agents: int, idle_timeout: float, *, durable: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStateStore(Path(tmp) / "states.sqlite") if durable else None
        core = AUNActorRuntime(idle_timeout=idle_timeout, state_store=store)
        runtime = AUNRuntime(core=core, archive=Path(tmp) / "archive.sqlite")
        inbox = await runtime.open_inbox()
        await runtime.start()
        gc.collect()
        base = rss_bytes()
        start = time.perf_counter()
        aids = [f"agent{n}.local" for n in range(agents)]
        registering = time.perf_counter()
        for aid in aids:
            await runtime.register_agent(aid, Session)
        registered = time.perf_counter() - registering
        for n, aid in enumerate(aids, 1):
            await inbox.send(aid, "hello")
            if n % ROUND == 0:
                await runtime.settle()
        await runtime.settle()
        delivered = runtime.stats.delivered
        while core.instances > 1:  # noqa: ASYNC110 - the idle timer is what is measured: wait for it
            await asyncio.sleep(idle_timeout / 4)  # (the inbox stays resident; every agent goes)
        elapsed = time.perf_counter() - start
        gc.collect()
        settled = rss_bytes()
        sample = await runtime.agent_instance(aids[agents // 2], Session)  # re-created with its state
        kept = await _context_size(sample.context)
        if delivered != agents or kept != 1 or core.saved_states != agents - 1:
            raise AssertionError(f"delivered {delivered}, context {kept}, saved {core.saved_states}")
        result = _figures(base, settled, agents, elapsed)
        result["registrations_per_s"] = round(agents / registered)
        result["evicted"] = core.evicted
        await runtime.close()
        return result


async def raw_autogen(agents: int, idle_timeout: float) -> dict[str, Any]:
    runtime = SingleThreadedAgentRuntime()
    await runtime.register_factory("session", RawSession)
    await runtime.add_subscription(TypeSubscription("hello", "session"))
    runtime.start()
    gc.collect()
    base = rss_bytes()
    start = time.perf_counter()
    message = Hello("hello", "app.local")
    for n in range(agents):
        await runtime.publish_message(message, TopicId("hello", f"agent{n}"))
        if (n + 1) % ROUND == 0:
            await runtime.stop_when_idle()
            runtime.start()
    await runtime.stop_when_idle()
    await asyncio.sleep(idle_timeout)  # the same idle phase; nothing is ever dropped
    elapsed = time.perf_counter() - start
    gc.collect()
    settled = rss_bytes()
    sample = await runtime.try_get_underlying_agent_instance(AgentId("session", f"agent{agents // 2}"), RawSession)
    if await _context_size(sample.context) != 1:
        raise AssertionError("a message was lost")
    return _figures(base, settled, agents, elapsed)


def _figures(base: int, settled: int, agents: int, elapsed: float) -> dict[str, Any]:
    return {
        "base_mb": round(base / MB, 1),
        "peak_mb": round(peak_rss_bytes() / MB, 1),
        "settled_mb": round(settled / MB, 1),
        "bytes_per_idle_agent": round((settled - base) / agents),
        "seconds": round(elapsed, 1),
    }


CONFIGURATIONS = {"aun_actor": aun_actor, "aun_actor_sqlite_state": aun_actor_sqlite_state, "raw_autogen": raw_autogen}
BASELINE = "raw_autogen"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--idle-timeout", type=float, default=1.0)
    parser.add_argument(
        "--raw-limit", type=int, default=None, help="skip raw autogen-core above this many AIDs (default: never)"
    )
    parser.add_argument("--only", choices=sorted(CONFIGURATIONS), action="append", help="run only these (repeatable)")
    parser.add_argument("--child", choices=sorted(CONFIGURATIONS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(CONFIGURATIONS[args.child](args.agents, args.idle_timeout))))
        return

    names = [name for name in CONFIGURATIONS if args.only is None or name in args.only]
    skipped: dict[str, str] = {}
    if BASELINE in names and args.raw_limit is not None and args.agents > args.raw_limit:
        names.remove(BASELINE)
        skipped[BASELINE] = f"skipped: {args.agents} AIDs is over --raw-limit {args.raw_limit}"
    options = ["--agents", str(args.agents), "--idle-timeout", str(args.idle_timeout)]
    results: dict[str, Any] = run_children(__file__, names, options)
    ours = [name for name in results if name != BASELINE]
    ratios = {}
    if BASELINE in results:
        theirs = results[BASELINE]
        ratios = {
            f"{BASELINE}_vs_{name}_{figure}": round(theirs[figure] / max(0.1, results[name][figure]), 2)
            for name in ours
            for figure in ("settled_mb", "bytes_per_idle_agent")
        }
    targets = {f"{name}_settled_under_1gb": results[name]["settled_mb"] < 1024 for name in results}
    for name in ours:
        targets[f"{name}_bytes_per_idle_agent_at_most_{BYTES_PER_AID_TARGET}"] = (
            results[name]["bytes_per_idle_agent"] <= BYTES_PER_AID_TARGET
        )
        targets[f"{name}_registrations_per_s_at_least_{REGISTRATIONS_PER_S_TARGET}"] = (
            results[name]["registrations_per_s"] >= REGISTRATIONS_PER_S_TARGET
        )
    print(
        json.dumps(
            {
                "bench": "idle_agents",
                "agents": args.agents,
                "idle_timeout_s": args.idle_timeout,
                "python": sys.version.split()[0],
                "results": {**results, **skipped},
                "ratios": ratios,
                "targets": targets,
            }
        )
    )


if __name__ == "__main__":
    main()
