"""The aun-runtime command: one table of commands, each declared in a module of this room, and the application files they load.

A room of the library (docs/where-things-live.md): its modules are private, and what of them is public
is exported by `aun_runtime` or the subpackage that offers it.
"""

__all__: list[str] = []
