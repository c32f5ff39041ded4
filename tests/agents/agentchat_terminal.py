"""A person answering at the terminal through agentchat's `UserProxyAgent`, as its own program:
`python -m tests.agents.agentchat_terminal INPUT_TIMEOUT`. ops.local asks four questions, one at a
time, and prints what it has been answered after each; the test feeds standard input."""

from __future__ import annotations

import asyncio
import sys

from autogen_agentchat.agents import UserProxyAgent

from agents.agentchat import from_agentchat
from aun_runtime import AUNRuntime

QUESTIONS = ("Deploy now?", "Tag the release?", "Close the ticket?", "Anything else?")


async def main(input_timeout: float) -> None:
    async with AUNRuntime() as runtime:
        await runtime.register_agent(
            "person.local", from_agentchat(lambda: UserProxyAgent("person"), input_timeout=input_timeout)
        )
        ops = await runtime.open_inbox("ops.local")
        for question in QUESTIONS:
            await ops.send("person.local", question)
            await runtime.settle()
            print(f"\n[ops.local was told {[m.text for m in ops.received]}]", flush=True)
    print("[done]", flush=True)


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1])))
