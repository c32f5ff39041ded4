"""Reusable agents built on aun_runtime, and the demo application."""

#: The package itself exports nothing: each pattern is a module of its own (``agents.observer``...).
__all__: list[str] = []
