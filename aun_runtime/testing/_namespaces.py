"""Machines that are apart, on one machine: network namespaces joined by a bridge, for tests.

A `PrivateNetwork` is a bridge in a namespace of its own and any number of namespaces, each
joined to the bridge by a veth pair and given one private address (`10.231.0.<n>/24`). The
addresses and links exist only inside those namespaces, so several networks (several test runs,
several xdist workers) can use the same addresses at once without meeting, and nothing of them is
visible from the machine's own network. Processes run inside a namespace with `ip netns exec`
(`Namespace.command`): they share the machine's files but not its network.

`Namespace.cut` takes the namespace's port on the bridge down: as with a cable pulled at the
switch, its packets go nowhere and nothing tells either side, which finds out only by its timeouts.
`Namespace.heal` brings it back. `PrivateNetwork.close` kills every process left inside
its namespaces and removes them (also at the exit of the process that made them); namespaces left by
a process that was killed first are recognised by their names, which carry its pid, and removed when
the next network is made.

Making namespaces needs root and iproute2's `ip`: `namespaces_unavailable` says why not.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from types import TracebackType

__all__ = ["NAMESPACE_PREFIX", "Namespace", "PrivateNetwork", "namespaces_unavailable"]

#: Every namespace a network makes is called ``<prefix><pid>-<network>-<label>``; the pid is the
#: process that made it, which is how leftovers of a killed run are told from the namespaces of
#: live ones.
NAMESPACE_PREFIX = "aunt"
_NAME = re.compile(rf"^{NAMESPACE_PREFIX}(\d+)-")
#: The /24 every network numbers its namespaces in (``.1`` up to ``.254``): private (RFC 1918), and
#: used only inside the network's own namespaces.
SUBNET = "10.231.0"
MAX_NAMESPACES = 254
#: Seconds to wait for the processes of a namespace to die after SIGKILL before removing it anyway.
KILL_TIMEOUT = 10.0
#: Seconds one ``ip`` command may take (it takes milliseconds; a hung one fails the test instead).
IP_TIMEOUT = 30.0
#: The device name of a namespace's end of its veth pair.
DEVICE = "eth0"
#: Seconds `Namespace.heal` waits for the namespace's link to carry again (it takes milliseconds;
#: on a loaded machine a little longer). Past it, `heal` raises instead of leaving a test to fail
#: on "No route to host" later.
HEAL_TIMEOUT = 10.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


@functools.cache
def namespaces_unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can). Checked once per process."""
    if os.geteuid() != 0:
        return "making network namespaces needs root (CI runs as root)"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed (apt-get install -y iproute2)"
    probe = f"{NAMESPACE_PREFIX}{os.getpid()}-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add fails here: {made.stderr.strip()[:200]}"
    _ip("netns", "delete", probe, check=False)
    return None


def _pids(namespace: str) -> list[int]:
    done = _ip("netns", "pids", namespace, check=False)
    return [int(pid) for pid in done.stdout.split()] if done.returncode == 0 else []


def _remove(namespace: str) -> None:
    """Kill whatever runs inside `namespace` and delete it."""
    deadline = time.monotonic() + KILL_TIMEOUT
    while (pids := _pids(namespace)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    _ip("netns", "delete", namespace, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def remove_leftover_namespaces() -> list[str]:
    """Remove the namespaces of processes that died without removing theirs; their names."""
    listed = _ip("netns", "list", check=False).stdout.splitlines()
    names = [line.split()[0] for line in listed if line.strip()]
    leftovers = [name for name in names if (m := _NAME.match(name)) and not _alive(int(m.group(1)))]
    for name in leftovers:
        _remove(name)
    return leftovers


class Namespace:
    """One namespace of a `PrivateNetwork`: a machine with one address on the network."""

    def __init__(self, name: str, address: str, port: str, bridge: str) -> None:
        self.name = name
        self.address = address  #: its address on the network (``10.231.0.<n>``)
        self._port = port  # its veth end on the bridge, in the bridge's namespace
        self._bridge = bridge

    def command(self, args: Sequence[str]) -> list[str]:
        """`args` as a command that runs inside this namespace."""
        return ["ip", "netns", "exec", self.name, *args]

    def run(self, args: Sequence[str], *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run `args` inside this namespace to its end; its output is captured."""
        return subprocess.run(self.command(args), capture_output=True, text=True, timeout=timeout)

    def cut(self) -> None:
        """Cut this namespace off the network: its port on the bridge goes down."""
        _ip("-n", self._bridge, "link", "set", self._port, "down")

    def heal(self) -> None:
        """Join it to the network again, and return once it can reach the others.

        The port coming up is not enough: the namespace's own end regains its carrier a moment
        later, and the addresses it failed to resolve while cut stay marked unreachable ("No
        route to host") until probed again, so those are forgotten here.
        """
        _ip("-n", self._bridge, "link", "set", self._port, "up")
        deadline = time.monotonic() + HEAL_TIMEOUT
        while "state UP" not in _ip("-n", self.name, "-o", "link", "show", DEVICE).stdout:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: its link did not come up within {HEAL_TIMEOUT} s of heal()")
            time.sleep(0.05)
        _ip("-n", self.name, "neigh", "flush", "all")

    def pids(self) -> list[int]:
        """The processes running inside it now."""
        return _pids(self.name)

    def __repr__(self) -> str:
        return f"Namespace({self.name!r}, {self.address})"


class PrivateNetwork:
    """Network namespaces on one bridge, each with an address on `10.231.0.0/24`.

    Example:
        ```python
        with PrivateNetwork() as network:
            host, worker = network.add("host"), network.add("worker")
            server = subprocess.Popen(host.command(["aun-runtime", "host", "--address", f"{host.address}:50051"]))
            ...
            worker.cut()   # a partition
            worker.heal()
        ```
    """

    _made = 0  # networks made by this process: part of each name

    def __init__(self) -> None:
        reason = namespaces_unavailable()
        if reason is not None:
            raise RuntimeError(f"network namespaces cannot be made here: {reason}")
        remove_leftover_namespaces()
        PrivateNetwork._made += 1
        self._base = f"{NAMESPACE_PREFIX}{os.getpid()}-{PrivateNetwork._made}"
        self.bridge = f"{self._base}-br"
        self.namespaces: list[Namespace] = []
        self._closed = False
        atexit.register(self.close)
        try:
            _ip("netns", "add", self.bridge)
            _ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.bridge, "link", "set", "br0", "up")
        except BaseException:
            self.close()
            raise

    def add(self, label: str) -> Namespace:
        """A new namespace on the network, with the next free address. `label` says what it is for."""
        if self._closed:
            raise RuntimeError("this network is closed")
        if not re.fullmatch(r"[a-z0-9]{1,20}", label):
            raise ValueError("a label is 1-20 lowercase letters or digits")
        number = len(self.namespaces) + 1
        if number > MAX_NAMESPACES:
            raise ValueError(f"a network has at most {MAX_NAMESPACES} namespaces (one /24)")
        name = f"{self._base}-{label}"
        port = f"p{number}"
        namespace = Namespace(name, f"{SUBNET}.{number}", port, self.bridge)
        _ip("netns", "add", name)
        self.namespaces.append(namespace)
        # Both ends are made inside namespaces: nothing of the network ever appears in the machine's own.
        _ip("-n", self.bridge, "link", "add", port, "type", "veth", "peer", "name", DEVICE, "netns", name)
        _ip("-n", self.bridge, "link", "set", port, "master", "br0", "up")
        _ip("-n", name, "addr", "add", f"{namespace.address}/24", "dev", DEVICE)
        _ip("-n", name, "link", "set", DEVICE, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        return namespace

    def close(self) -> None:
        """Kill every process inside the network's namespaces and remove them. Idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for namespace in self.namespaces:
            _remove(namespace.name)
        _remove(self.bridge)

    def __enter__(self) -> PrivateNetwork:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
