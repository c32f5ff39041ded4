"""The demo: a small autonomous scenario on the embedded runtime.

Run it with ``aun-runtime demo`` (or ``aun-runtime run agents.demo:app``). It shows

* an agent that answers twice (one message, two replies),
* an agent that stays silent (its message shows as delivered, not as an error),
* an agent that speaks first, with nobody having written to it,
* a group in ``mention`` mode, where what does not name an agent is archived, not shown to it.
"""

from __future__ import annotations

from aun_runtime import AUNAgent, AUNRuntime

from .echo import EchoTwice, Quiet


class Herald(AUNAgent):
    """Opens the day in the lobby on its own, asking the echo agent by name."""

    async def on_start(self) -> None:
        await self.group_send("lobby", "Good morning, lobby! twice, are you up?", mentions=["twice.local"])


async def app(runtime: AUNRuntime) -> None:
    """Register the cast, play the scenario, and let everything settle."""
    await runtime.register_agent("twice.local", EchoTwice)
    await runtime.register_agent("quiet.local", Quiet)
    inbox = await runtime.open_inbox("app.local")
    await runtime.create_group(
        "lobby", ["twice.local", "quiet.local", "herald.local", "app.local"], dispatch_mode="mention"
    )
    await runtime.register_agent("herald.local", Herald)  # speaks as soon as it exists

    await inbox.send("twice.local", "Can you hear me?")
    await inbox.send("quiet.local", "Anyone home?")
    await inbox.group_send("lobby", "Lunch at noon, for whoever reads this.")
    await inbox.group_send("lobby", "quiet, any objections?", mentions=["quiet.local"])
    await runtime.settle()
