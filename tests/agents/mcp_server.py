"""A tiny, deterministic MCP server over stdio, for the tests that use MCP tools through a workbench.

Run as ``python tests/agents/mcp_server.py``: it speaks MCP on stdin/stdout until stdin closes.
"""

from __future__ import annotations

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


if __name__ == "__main__":
    server.run("stdio")
