"""How a message reaches a handler: the send path, the group fan-out, the placement of AIDs, the channel, the mailbox and its rule, the turn, and what the runtime needs of the core that carries its publishes (AUNCore).

A room of the library (docs/where-things-live.md): its modules are private, and what of them is public
is exported by `aun_runtime` or the subpackage that offers it.
"""

__all__: list[str] = []
