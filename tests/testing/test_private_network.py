"""Network namespaces for tests: apart from each other and from the machine, cut and healed on
demand, and removed afterwards even when the process that made them is killed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from aun_runtime.testing._namespaces import NAMESPACE_PREFIX, SUBNET, remove_leftover_namespaces
from aun_runtime.testing.infrastructure import Namespace, PrivateNetwork

ROOT = Path(__file__).resolve().parents[2]
PORT = 7000
#: One line from a server that answers every connection with its namespace's name.
SERVER = textwrap.dedent("""
    import socket, sys
    listener = socket.create_server(("0.0.0.0", PORT))
    print("listening", flush=True)
    while True:
        connection, _ = listener.accept()
        connection.sendall(sys.argv[1].encode())
        connection.close()
""").replace("PORT", str(PORT))


def _ask(client: Namespace, address: str, timeout: float = 2.0) -> str:
    """What the server at ``address`` says to a connection from inside ``client`` ("" if none came)."""
    script = textwrap.dedent(f"""
        import socket
        try:
            with socket.create_connection(({address!r}, {PORT}), timeout={timeout}) as s:
                print(s.recv(100).decode())
        except OSError as exc:
            print("")
    """)
    return client.run([sys.executable, "-c", script], timeout=timeout + 30).stdout.strip()


def _serve(namespace: Namespace, says: str) -> subprocess.Popen[str]:
    server = subprocess.Popen(namespace.command([sys.executable, "-c", SERVER, says]), stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().strip() == "listening"
    return server


def _namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
    return [line.split()[0] for line in listed if line.startswith(NAMESPACE_PREFIX)]


def test_namespaces_reach_each_other_by_address_and_a_cut_one_is_silent_until_healed(
    private_network: PrivateNetwork,
) -> None:
    server, client, bystander = (private_network.add(label) for label in ("server", "client", "bystander"))
    assert len({server.address, client.address, bystander.address}) == 3
    _serve(server, "from server")
    assert _ask(client, server.address) == "from server"
    # Nothing of the network is in the machine's own namespace (checked without sending it anything:
    # from there, a 10.x address is routed off the machine).
    own = subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    assert SUBNET not in own

    client.cut()
    started = time.monotonic()
    assert _ask(client, server.address, timeout=1.5) == ""
    assert time.monotonic() - started >= 1.4  # no answer, no refusal: a silence that times out
    assert _ask(bystander, server.address) == "from server"  # the others still talk

    client.heal()
    assert _ask(client, server.address, timeout=10) == "from server"


def test_closing_kills_what_runs_inside_and_removes_every_namespace() -> None:
    network = PrivateNetwork()
    inside = network.add("inside")
    server = _serve(inside, "still here")
    # A process that leaves its parent (as pg_ctl's server does) is found by its namespace all the same.
    daemon = inside.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"]).stdout.strip()
    names = {inside.name, network.bridge}
    assert names <= set(_namespaces())
    network.close()
    assert server.wait(timeout=10) != 0
    assert not Path(f"/proc/{daemon}/cmdline").exists() or Path(f"/proc/{daemon}/stat").read_text().split()[2] == "Z"
    assert not names & set(_namespaces())


def test_the_namespaces_of_a_killed_process_are_removed_when_the_next_network_is_made() -> None:
    script = textwrap.dedent("""
        import time
        from aun_runtime.testing.infrastructure import PrivateNetwork
        network = PrivateNetwork()
        print(network.add("left").name, network.bridge, flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        left = set(child.stdout.readline().split())
    finally:
        child.kill()
        child.wait()
    assert len(left) == 2 and left <= set(_namespaces())  # a killed process removes nothing
    assert set(remove_leftover_namespaces()) >= left
    assert not left & set(_namespaces())


def test_where_namespaces_cannot_be_made_the_run_says_which_tests_did_not_run_and_why(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["aun_runtime.testing.pytest_plugin"]\n')
    (tmp_path / "test_apart.py").write_text("def test_apart(private_network):\n    raise AssertionError('ran')\n")
    (tmp_path / "bin").mkdir()  # a PATH without iproute2's ip
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path), "--rootdir", str(tmp_path)],
        cwd=tmp_path, env={"PATH": str(tmp_path / "bin"), "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "1 test(s) not run across network namespaces: iproute2's ip is not installed" in done.stdout
