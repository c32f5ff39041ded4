"""Running as a service: logs, metrics and probes, the OTEL_* environment, signals and exit codes, AUN_* options, one-line errors.

A room of the library (docs/where-things-live.md): its modules are private, and what of them is public
is exported by `aun_runtime` or the subpackage that offers it.
"""

__all__: list[str] = []
