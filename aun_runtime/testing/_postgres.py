"""A throwaway PostgreSQL server for tests: `initdb` in a temporary directory, `pg_ctl` to run it.

Nothing is assumed to be running: the server is made from the PostgreSQL server programs on the
machine (Debian's `postgresql` package puts them in `/usr/lib/postgresql/<version>/bin`), lives in
a directory of its own under the temporary directory, and is stopped and removed by [`stop`][aun_runtime.AUNCore.stop]
(also at the exit of the process that started it). `initdb` and `pg_ctl` refuse to run as root,
so as root the server runs as the unprivileged `postgres` user (`nobody` where there is none),
which then owns its directory.

The server trusts every local connection (`initdb -A trust`): it is for tests, on loopback, a unix
socket directory, or an address inside a network namespace a test made. A server left behind by a
process that was killed before it could stop it is found by its directory's name and owner file, and
stopped and removed the next time a server starts.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ExternalPostgres", "PostgresServer", "PostgresUnavailableError", "postgres_bin_dir", "remove_leftovers"]

#: The prefix of every server directory, and how leftovers of killed runs are recognised.
DIRECTORY_PREFIX = "aun-postgres-"
#: Seconds ``pg_ctl`` waits for the server to start or stop. A cold start on a busy 2-core machine
#: takes about a second; past this the start fails with the server's log in the error.
PG_CTL_TIMEOUT = 60
#: Times a start is tried on a fresh free port when the port was taken between choosing it and the
#: server binding it (another process picked it meanwhile): rare, and one retry nearly always does.
PORT_ATTEMPTS = 3
#: The user the server runs as when the tests run as root (``initdb`` and ``pg_ctl`` refuse root).
SERVER_USER = "postgres"


class PostgresUnavailableError(RuntimeError):
    """The PostgreSQL server programs are not on this machine, or the server would not start."""


def postgres_bin_dir() -> Path:
    """The directory of `initdb`, `pg_ctl` and `psql`.

    `AUN_POSTGRES_BIN` names it; otherwise the newest `/usr/lib/postgresql/<version>/bin`, then
    wherever `initdb` is on `PATH`.

    Raises:
        PostgresUnavailableError: none of these holds `initdb`; the message says what to install.
    """
    named = os.environ.get("AUN_POSTGRES_BIN")
    candidates = [Path(named)] if named else []
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        versions = [p for p in debian.iterdir() if p.name.replace(".", "").isdigit()]
        candidates += [p / "bin" for p in sorted(versions, key=lambda p: float(p.name), reverse=True)]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise PostgresUnavailableError(
        "PostgreSQL's server programs (initdb, pg_ctl) are not on this machine: install Debian's package with"
        "  sudo apt-get install -y postgresql  (or set AUN_POSTGRES_BIN to the directory that holds them)"
    )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Databases:
    """Fresh databases on a server: what a test that needs one asks of it."""

    def url(self, database: str = "postgres") -> str:
        raise NotImplementedError

    def sql(self, statement: str) -> str:
        raise NotImplementedError

    def create_database(self, name: str | None = None) -> str:
        """Make an empty database (`name` None: a fresh `aun_<random>`) and return its URL."""
        name = name or f"aun_{secrets.token_hex(6)}"
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop `name`, ending the sessions still connected to it."""
        self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class ExternalPostgres(_Databases):
    """A PostgreSQL server that is already running, known by the URL of a role that may create
    databases (the test run's shared server, or a real one a developer points the tests at).

    Args:
        url: `postgresql://user[:password]@host[:port]/database`; databases are made beside
            `database` on the same server, as the same user.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres") or not parts.hostname:
            raise ValueError(f"{url!r} is not a postgresql://user@host:port/database URL")
        self.admin_url = url
        self._parts = parts

    def url(self, database: str = "postgres") -> str:
        parts = self._parts
        return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))

    def sql(self, statement: str) -> str:
        """Run one SQL statement through `psql` as the URL's user; its output."""
        try:
            bin_dir = postgres_bin_dir()
        except PostgresUnavailableError:
            psql = shutil.which("psql")
            if psql is None:
                raise
            bin_dir = Path(psql).parent
        return _psql(bin_dir, ["-d", self.admin_url], statement, lambda: "")


class PostgresServer(_Databases):
    """One PostgreSQL server, made for the test run and removed after it.

    Args:
        host: the address it listens on (`127.0.0.1`; inside a network namespace, that namespace's).
        port: its port; None picks a free one on `host`.
        durable: False (the default) turns `fsync` and full-page writes off: a crash of the
            machine (not of the server, which `crash` makes) may lose what a test wrote, which a
            throwaway server does not mind, and tests run faster. A benchmark that compares stores
            keeps them on (True).
        settings: more server settings (`postgres -c` names), e.g. `{"synchronous_commit": "off"}`,
            a common tuning under which the runtime's sessions must still commit durably.
        prefix: a command prefix to run the server programs with, e.g. `["ip", "netns", "exec",
            "ns1"]` to run the server inside a network namespace.
        max_connections: the server's connection limit (PostgreSQL's default, 100). A test that
            opens more gets `too many clients` from the server.

    The superuser is `postgres`, with no password. [`url`][aun_runtime.gateway.GatewayServer.url] is a URL for a database;
    `create_database` makes a fresh one. A server also stops with the process that started it.

    Example:
        ```python
        with PostgresServer() as server:
            url = server.create_database()  # postgresql://postgres@127.0.0.1:PORT/aun_...
            ...  # connect to url
        ```
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        durable: bool = False,
        settings: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        max_connections: int = 100,
    ) -> None:
        self.host = host
        self.port = port
        self.durable = durable
        self.settings = dict(settings or {})
        self.prefix = list(prefix)
        self.max_connections = max_connections
        self.directory: Path | None = None
        self._user: str | None = None
        self._bin: Path | None = None

    # -- life ----------------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        """Make the data directory, start the server, and return once it accepts connections.

        Raises:
            PostgresUnavailableError: the programs are missing, or the server did not start (the
                message holds the end of its log).
        """
        if self.directory is not None:
            raise RuntimeError("this server is already started")
        self._bin = postgres_bin_dir()
        remove_leftovers()
        self._user = self._server_user()
        self.directory = Path(tempfile.mkdtemp(prefix=DIRECTORY_PREFIX))
        (self.directory / "owner").write_text(f"{os.getpid()}\n")
        atexit.register(self.stop)
        try:
            self.socket_dir.mkdir()
            if self._user is not None:
                entry = pwd.getpwnam(self._user)
                for path in (self.directory, self.socket_dir):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
            self._run(
                "initdb", "-D", str(self.data_dir), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                "--locale=C", "--no-sync", "--no-instructions",
            )  # fmt: skip
            # initdb trusts loopback only; a server on a namespace's address also trusts its
            # neighbours there (samenet: the subnets of the server's own addresses).
            with open(self.data_dir / "pg_hba.conf", "a") as hba:
                hba.write("host all all samenet trust\n")
            self._start_on_a_port()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_on_a_port(self) -> None:
        fixed = self.port is not None
        for attempt in range(1 if fixed else PORT_ATTEMPTS):
            if not fixed:
                self.port = _free_port(self.host)
            try:
                self._pg_ctl_start()
                return
            except PostgresUnavailableError:
                if fixed or attempt == PORT_ATTEMPTS - 1 or "could not bind" not in self.log():
                    raise

    def _options(self) -> str:
        options = {
            "listen_addresses": self.host,
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            "max_connections": str(self.max_connections),
        }
        if not self.durable:
            options |= {"fsync": "off", "full_page_writes": "off"}
        options |= self.settings
        return " ".join(f"-c {key}={value}" for key, value in options.items())

    def stop(self) -> None:
        """Stop the server (fast shutdown; immediate if that fails) and remove its directory. Idempotent."""
        directory, self.directory = self.directory, None
        if directory is None:
            return
        atexit.unregister(self.stop)
        _stop_and_remove(directory, self._bin or postgres_bin_dir(), self._user)

    def crash(self) -> None:
        """Stop the server as a crash would (`pg_ctl -m immediate`: no checkpoint, every session cut;
        the next start recovers from the write-ahead log). The data directory stays for `start_again`."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "-t", str(PG_CTL_TIMEOUT), "stop")

    def start_again(self) -> None:
        """Start the server after `crash`, from the same data directory on the same address and port."""
        self._pg_ctl_start()

    def _pg_ctl_start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_path), "-o", self._options(),
                  "-w", "-t", str(PG_CTL_TIMEOUT), "start")  # fmt: skip

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- where it is ---------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._started / "data"

    @property
    def socket_dir(self) -> Path:
        """The unix socket directory: reachable from any network namespace of this machine."""
        return self._started / "socket"

    @property
    def log_path(self) -> Path:
        return self._started / "server.log"

    @property
    def _started(self) -> Path:
        if self.directory is None:
            raise RuntimeError("the server is not started")
        return self.directory

    def url(self, database: str = "postgres") -> str:
        """A `postgresql://` URL of `database` on this server, over TCP at `host`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgresql://postgres@{host}:{self.port}/{database}"

    def sql(self, statement: str) -> str:
        """Run one SQL statement as the superuser (through `psql` on the unix socket); its output."""
        assert self._bin is not None
        return _psql(self._bin, ["-h", str(self.socket_dir), "-p", str(self.port), "-U", "postgres", "-d", "postgres"],
                     statement, self.log)  # fmt: skip

    def log(self) -> str:
        """The server's log so far (empty before it wrote one)."""
        try:
            return self.log_path.read_text(errors="replace")
        except (FileNotFoundError, RuntimeError):
            return ""

    # -- running its programs ------------------------------------------------------------------

    @staticmethod
    def _server_user() -> str | None:
        if os.geteuid() != 0:
            return None
        for user in (SERVER_USER, "nobody"):
            with contextlib.suppress(KeyError):
                pwd.getpwnam(user)
                return user
        raise PostgresUnavailableError("running as root, and there is neither a postgres nor a nobody user to run the server as")

    def _run(self, program: str, *args: str) -> str:
        assert self._bin is not None
        as_user = ["runuser", "-u", self._user, "--"] if self._user is not None else []

        return _command(as_user, [*self.prefix, *as_user, str(self._bin / program), *args], self.log)


def _psql(bin_dir: Path, target: list[str], statement: str, log: Callable[[], str]) -> str:
    psql = [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", *target, "-c", statement]
    return _command([], psql, log)


def _command(as_user: list[str], command: list[str], log: Callable[[], str]) -> str:
    # As another user the working directory must be one that user may enter.
    done = subprocess.run(command, cwd="/", capture_output=True, text=True, timeout=PG_CTL_TIMEOUT + 30)
    if done.returncode != 0:
        tail = log()[-3000:]
        raise PostgresUnavailableError(
            f"{' '.join(command[len(as_user):][:4])} ... failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
            + (f"\nserver log:\n{tail}" if tail else "")
        )
    return done.stdout


def _stop_and_remove(directory: Path, bin_dir: Path, user: str | None) -> None:
    # Stopping is signalling the postmaster named in the pid file: it needs no network, so it works
    # from any namespace, even after the server's namespace is gone.
    data = directory / "data"
    if (data / "postmaster.pid").exists():
        as_user = ["runuser", "-u", user, "--"] if user is not None else []
        for mode in ("fast", "immediate"):
            done = subprocess.run(
                [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", mode, "-w", "-t", "30", "stop"],
                cwd="/", capture_output=True, timeout=60,
            )  # fmt: skip
            if done.returncode == 0:
                break
        else:
            _kill_postmaster(data)
    shutil.rmtree(directory, ignore_errors=True)


def _kill_postmaster(data: Path) -> None:
    """The last resort when `pg_ctl` cannot stop it: SIGKILL the postmaster named in its pid file."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 9)


def remove_leftovers() -> list[Path]:
    """Stop and remove the servers of processes that died without stopping theirs; what was removed.

    A server directory names the process that started it (its `owner` file); one whose process is
    gone is a leftover of a killed run. Servers of live processes (other test runs, other xdist
    workers) are left alone.
    """
    removed: list[Path] = []
    for directory in Path(tempfile.gettempdir()).glob(DIRECTORY_PREFIX + "*"):
        try:
            owner = int((directory / "owner").read_text().strip())
        except (OSError, ValueError):
            continue  # not one of ours, or still being made
        if _alive(owner):
            continue
        try:
            bin_dir = postgres_bin_dir()
        except PostgresUnavailableError:
            break
        user = None
        if os.geteuid() == 0:
            with contextlib.suppress(KeyError):
                user = pwd.getpwuid((directory / "data").stat().st_uid).pw_name
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            _stop_and_remove(directory, bin_dir, user if user != "root" else None)
            removed.append(directory)
    return removed
