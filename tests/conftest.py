"""Shared fixtures. Runtime kinds are listed in tests/conformance/conftest.py.

``postgres_url`` (a fresh database on the run's own PostgreSQL server) and ``private_network``
(network namespaces) come from the runtime's pytest plugin.
"""

pytest_plugins = ["aun_runtime.testing.pytest_plugin"]
