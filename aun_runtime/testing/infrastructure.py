"""Test infrastructure: a real PostgreSQL server and real network namespaces, made by the test itself.

These are not stand-ins. They start real servers and change the machine's network configuration,
so they are kept apart from the scripted agents of [`aun_runtime.testing`][aun_runtime.testing],
which any test can use anywhere:

* `PostgresServer` makes a throwaway PostgreSQL server with `initdb` in a temporary directory and
  runs it with `pg_ctl` until it is stopped (or the process that started it exits). It needs the
  PostgreSQL server programs on the machine (Debian's `postgresql` package, or `AUN_POSTGRES_BIN`
  naming their directory: `postgres_bin_dir` finds them); as root, it runs them as the unprivileged
  `postgres` user. `ExternalPostgres` hands out databases on a server that is already running.
* `PrivateNetwork` makes network namespaces joined by a bridge (machines that are apart, with links
  a test can cut), and removes them afterwards. It needs root and iproute2's `ip`:
  `namespaces_unavailable` says why they cannot be made here.

The pytest fixtures `postgres_url` (a fresh database per test) and `private_network` (a
`PrivateNetwork` per test) are in `aun_runtime.testing.pytest_plugin`.

Example:
    ```python
    from aun_runtime.testing.infrastructure import PostgresServer, PrivateNetwork

    with PostgresServer() as server:
        url = server.create_database()  # postgresql://postgres@127.0.0.1:PORT/aun_...

    with PrivateNetwork() as network:
        first, second = network.add("one"), network.add("two")
        second.cut()  # first's packets to second go nowhere now
    ```
"""

from __future__ import annotations

from ._namespaces import Namespace, PrivateNetwork, namespaces_unavailable
from ._postgres import ExternalPostgres, PostgresServer, PostgresUnavailableError, postgres_bin_dir

__all__ = [
    "ExternalPostgres",
    "Namespace",
    "PostgresServer",
    "PostgresUnavailableError",
    "PrivateNetwork",
    "namespaces_unavailable",
    "postgres_bin_dir",
]
