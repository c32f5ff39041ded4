"""A tiny, deterministic MCP server over stdio, for the tests that use MCP tools through a workbench.

Run as ``python tests/agents/mcp_server.py``: it speaks MCP on stdin/stdout until stdin closes.
``--slow-start=SECONDS`` makes it wait that long before it answers anything (a server still
starting); any other argument is ignored (a test may tag its server's command line with one).
"""

from __future__ import annotations

import asyncio
import sys
import time

from mcp.server.fastmcp import FastMCP

CITIES = {
    "paris": "Paris: France, 2.1 million people, on the Seine.",
    "lagos": "Lagos: Nigeria, 15.4 million people, on the Gulf of Guinea.",
    "osaka": "Osaka: Japan, 2.7 million people, on Osaka Bay.",
}

server = FastMCP("aun-test-tools", log_level="WARNING")  # no log line per request on stderr


@server.tool()
def word_count(text: str) -> int:
    """Count the words in a text (separated by whitespace)."""
    return len(text.split())


@server.tool()
def lookup(city: str) -> str:
    """Look a city up in a small gazetteer."""
    return CITIES.get(city.strip().lower(), f"no entry for {city!r}")


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
