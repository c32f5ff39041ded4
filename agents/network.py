"""Agents to put on the AUN network: the reflection team and an agent that answers twice.

The same application runs on the embedded runtime and on any AUN gateway, by configuration alone:
its AIDs are built from the runtime's domain (`coder.local` alone, `coder.aun.localhost` on the
local gateway, `coder.<issuer>` on a public one). `aun-runtime demo --gateway` runs it against a
local gateway and sends it a coding task from a plain AUN client; `aun-runtime run agents.network:team
--gateway-url ...` serves it on any gateway.
"""

from __future__ import annotations

from aun_runtime import AUNRuntime

from .demo import demo_model
from .echo import EchoTwice, Quiet
from .reflection import register_reflection_team
from .stand_ins import reflection_team

__all__ = ["team"]


async def team(runtime: AUNRuntime) -> None:
    """Register `coder`, `executor` and `reviewer` (the reflection team), `twice` (answers
    every message twice) and `quiet` (answers nothing) in the runtime's domain."""
    domain = runtime.domain
    await register_reflection_team(
        runtime,
        demo_model(reflection_team),
        coder=f"coder.{domain}",
        executor=f"executor.{domain}",
        reviewer=f"reviewer.{domain}",
    )
    await runtime.register_agent(f"twice.{domain}", EchoTwice)
    await runtime.register_agent(f"quiet.{domain}", Quiet)
