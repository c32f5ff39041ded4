"""The gazetteer MCP server (agents/gazetteer.py) with two tools more for the tests, over stdio.

Run as ``python tests/agents/mcp_server.py``: it speaks MCP on stdin/stdout until stdin closes.
``stall`` waits as long as it is asked to (a tool that hangs). ``--slow-start=SECONDS`` makes the
server wait that long before it answers anything (a server still starting); any other argument is
ignored (a test may tag its server's command line with one).
"""

from __future__ import annotations

import asyncio
import sys
import time

from agents.gazetteer import server


@server.tool()
async def stall(seconds: float) -> str:
    """Wait for a number of seconds, then say so: a tool that can be made to hang."""
    await asyncio.sleep(seconds)
    return f"waited {seconds:g} s"


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        if argument.startswith("--slow-start="):
            time.sleep(float(argument.partition("=")[2]))
    server.run("stdio")
