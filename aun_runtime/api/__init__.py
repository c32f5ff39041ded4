"""What an application holds: the runtime facade (AUNRuntime) and the parts it delegates to, the agent base class (AUNAgent), the application's inbox.

A room of the library (docs/where-things-live.md): its modules are private, and what of them is public
is exported by `aun_runtime` or the subpackage that offers it.
"""

__all__: list[str] = []
