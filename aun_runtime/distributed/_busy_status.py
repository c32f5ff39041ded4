"""`aun-runtime status --busy HOST:PORT`: the busy agents of the processes that run them.

The host routes messages; it does not see the turns of its workers' agents, nor their mailboxes.
Each process that runs agents (a `worker`, `run`) serves its own at `GET /busy` on its `--http`
port; `status` asks the ones it is given and prints them beside the host's counters, by address.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

__all__ = ["BUSY_TIMEOUT", "ask_busy"]

#: Seconds one process may take to answer: a process that does not answer in that is reported so.
BUSY_TIMEOUT = 5.0


async def ask_busy(addresses: list[str]) -> tuple[dict[str, Any], bool]:
    """Each address's busy agents (a list), or what it said instead (a string); and whether every
    process answered (one that runs no agents answers so; one that gives no answer does not)."""
    timeout = aiohttp.ClientTimeout(total=BUSY_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        answers = await asyncio.gather(*(_ask(session, address) for address in addresses))
    return {address: found for address, (found, _) in zip(addresses, answers, strict=True)}, all(
        answered for _, answered in answers
    )


async def _ask(session: aiohttp.ClientSession, address: str) -> tuple[list[dict[str, Any]] | str, bool]:
    try:
        async with session.get(f"http://{address}/busy") as response:
            if response.status == 404:
                return "runs no agents (a host or a gateway), or has not opened its runtime yet", True
            if response.status != 200:
                return f"no answer: HTTP {response.status}", False
            body = await response.json()
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return f"no answer: {type(exc).__name__} {exc}".strip(), False
    busy = body.get("busy") if isinstance(body, dict) else None
    return (busy, True) if isinstance(busy, list) else ("no answer: not a /busy report", False)
