"""Reading an archive back: the transcript, following it as it grows, merging several archives, riding out a database's restart.

A room of the library (docs/where-things-live.md): its modules are private, and what of them is public
is exported by `aun_runtime` or the subpackage that offers it.
"""

__all__: list[str] = []
