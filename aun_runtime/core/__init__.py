"""The in-process cores that carry publishes: the actor core (the default) and autogen-core's own runtime with the AUN rules.

A room of the library (docs/where-things-live.md): its modules are private, and what of them is public
is exported by `aun_runtime` or the subpackage that offers it.
"""

__all__: list[str] = []
