"""The words every room of the library uses: errors, topic names, groups, payloads, counters, budgets, agent.md cards, and the one fence around autogen's private names.

A room of the library (docs/where-things-live.md): its modules are private, and what of them is public
is exported by `aun_runtime` or the subpackage that offers it.
"""

__all__: list[str] = []
