"""The console: a web page that shows the live message flow the way AUN asks clients to show it.

* Silence is not an error. A message nobody answered is *delivered*, in a neutral colour; there is
  no "unanswered" state at all.
* Replies are grouped under the message they answer (`in_reply_to`), however many there are: 0, 1
  or N.
* A message an agent sent on its own, answering nothing, is marked *proactive*.
* What an agent's channel kept from it (mention mode) and what an agent decided not to say (its
  thoughts) are visible but muted, behind a toggle.
* `tool_call` / `tool_result` are drawn as notes on the sender's own tool use, never as requests.
* Dead letters, loop-guard stops and budget stops stand out: those are the real failures.

Open it next to a runtime in this process:

```text
async with Console(runtime) as console:
    print(console.url)
```

or on an archive file that another process writes: `aun-runtime console --archive path.sqlite`.
The console reads only the archive (SQLite, WAL mode, opened read-only), so anything that writes
the archive schema can be watched, a gateway included. Sending as an agent is possible only with a
runtime in this process and `allow_send=True`.

Agent cards come from the archive's `agents` table, which the runtime fills at registration:
AID, role (agent or application inbox), mode, description, and the agent's agent.md when it has one
(`register_agent(..., card=...)` or the class's `agent_md`). The page shows the card's fields
and body, and the runtime's metadata for an agent without one.

Why this stack:

* **aiohttp** serves the page, a small JSON API and the event stream from one asyncio server that
  runs in the runtime's own event loop, so an in-process console reads the runtime's archive
  without threads or copies. The `websockets` package, already a dependency, is a WebSocket
  server whose HTTP side is a hook for health checks, not a router for pages, JSON and streams.
  The AUN client the gateway speaks through (`fastaun`) requires aiohttp too, so the project
  carries one HTTP stack, not two.
* **Server-Sent Events**, not a WebSocket: the flow is one way, and an `EventSource` reconnects
  by itself, sending `Last-Event-ID`, which here is the id of the last archive record the page
  got. That id is the whole cursor: a page is sent each record once, in order, without gaps, and
  the archive is never re-sent per tick. Sending is a rare, explicit `POST`.
* **Plain HTML, CSS and JavaScript** from package data, no build step: the page is a few hundred
  lines, and a bundler would add a Node toolchain to every install and CI run for nothing.
"""

from ._console import DEFAULT_BACKLOG, DEFAULT_HOST, Console
from ._feed import DEFAULT_POLL_INTERVAL, PAGE_SIZE

__all__ = ["DEFAULT_BACKLOG", "DEFAULT_HOST", "DEFAULT_POLL_INTERVAL", "PAGE_SIZE", "Console"]
