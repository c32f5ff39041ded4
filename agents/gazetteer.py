"""`gazetteer`: a tiny MCP server, the tool server of the MCP example (docs/mcp.md) and its tests.

Run it as `python -m agents.gazetteer`: it speaks MCP over stdin/stdout until stdin closes, which
is how autogen-ext's `McpWorkbench` starts an MCP server and talks to it
(`StdioServerParams(command=sys.executable, args=["-m", "agents.gazetteer"])`). Two tools:
`lookup` (a city in a small gazetteer) and `word_count`. Needs the `mcp` extra.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

__all__ = ["CITIES", "server"]

#: What the gazetteer knows.
CITIES = {
    "paris": "Paris: France, 2.1 million people, on the Seine.",
    "lagos": "Lagos: Nigeria, 15.4 million people, on the Gulf of Guinea.",
    "osaka": "Osaka: Japan, 2.7 million people, on Osaka Bay.",
}

#: The MCP server (FastMCP); no log line per request on stderr.
server = FastMCP("aun-gazetteer", log_level="WARNING")


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
