"""``make test`` installs the Debian packages the tests need itself: as root with apt-get, in one go;
otherwise it says which command to run.

The package manager is replaced by a stub script on ``PATH`` (installing a browser or a database in
a unit test is neither possible nor wanted), and so are the programs it looks for; ``.ci/run`` on a
fresh machine is the real check.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install-test-deps.sh"


@dataclass
class Machine:
    """A pretend machine: which of chromium, PostgreSQL's server programs, valgrind, prometheus and ``ip`` it has."""

    root: Path
    uid: int

    @property
    def chromium(self) -> Path:
        return self.root / "chromium"

    @property
    def prometheus(self) -> Path:
        return self.root / "prometheus"

    @property
    def postgres(self) -> Path:
        return self.root / "postgresql" / "bin"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def calls(self) -> Path:
        return self.root / "apt-get.calls"

    def give(self, *what: str) -> None:
        for name in what:
            if name == "chromium":
                _executable(self.chromium)
            elif name == "prometheus":
                _executable(self.prometheus)
            elif name == "postgresql":
                _executable(self.postgres / "initdb")
                _executable(self.postgres / "pg_ctl")
            elif name == "valgrind":
                _executable(self.bin / "valgrind")
            else:
                _executable(self.bin / "ip")

    def has(self, name: str) -> bool:
        path = {
            "chromium": self.chromium,
            "postgresql": self.postgres / "pg_ctl",
            "valgrind": self.bin / "valgrind",
            "prometheus": self.prometheus,
            "ip": self.bin / "ip",
        }[name]
        return os.access(path, os.X_OK)

    def run(self) -> subprocess.CompletedProcess[str]:
        # PATH holds the stubs alone: an `ip` of the real machine must not count as this one's.
        env = {"PATH": str(self.bin), "AUN_CHROMIUM": str(self.chromium), "AUN_POSTGRES_BIN": str(self.postgres),
               "AUN_PROMETHEUS": str(self.prometheus)}
        return subprocess.run(["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True)

    def apt_calls(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


def _executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def _machine(tmp_path: Path, uid: int) -> Machine:
    machine = Machine(tmp_path, uid)
    machine.bin.mkdir()
    # apt-get "installs" what it is asked for by making the programs each package brings.
    (machine.bin / "apt-get").write_text(
        "#!/bin/sh\nPATH=/usr/bin:/bin\n"
        f'echo "$@" >> {machine.calls}\n'
        '[ "$1" = install ] || exit 0\n'
        "for package in \"$@\"; do case $package in\n"
        f"  chromium) printf '#!/bin/sh\\n' > {machine.chromium}; chmod +x {machine.chromium};;\n"
        f"  postgresql) mkdir -p {machine.postgres}; for p in initdb pg_ctl; do printf '#!/bin/sh\\n' > {machine.postgres}/$p;"
        f" chmod +x {machine.postgres}/$p; done;;\n"
        f"  valgrind) printf '#!/bin/sh\\n' > {machine.bin}/valgrind; chmod +x {machine.bin}/valgrind;;\n"
        f"  prometheus) printf '#!/bin/sh\\n' > {machine.prometheus}; chmod +x {machine.prometheus};;\n"
        f"  iproute2) printf '#!/bin/sh\\n' > {machine.bin}/ip; chmod +x {machine.bin}/ip;;\n"
        "esac; done\n"
    )
    (machine.bin / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for stub in machine.bin.iterdir():
        stub.chmod(0o755)
    return machine


def test_as_root_it_installs_everything_missing_in_one_apt_get(tmp_path: Path) -> None:
    machine = _machine(tmp_path, uid=0)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls() == ["update", "install -y chromium postgresql valgrind prometheus iproute2"]
    assert machine.has("chromium") and machine.has("postgresql") and machine.has("valgrind")
    assert machine.has("prometheus") and machine.has("ip")


def test_as_root_it_installs_only_what_is_missing(tmp_path: Path) -> None:
    machine = _machine(tmp_path, uid=0)
    machine.give("chromium", "valgrind", "prometheus", "ip")
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls() == ["update", "install -y postgresql"]
    assert machine.has("postgresql")


def test_as_another_user_it_stops_at_once_with_the_command_to_run(tmp_path: Path) -> None:
    machine = _machine(tmp_path, uid=1000)
    machine.give("chromium", "valgrind", "prometheus")
    done = machine.run()
    assert done.returncode == 1
    # Without root the namespace tests cannot run anyway, so iproute2 is not asked for.
    assert "sudo apt-get install -y postgresql " in done.stderr
    assert machine.apt_calls() == [] and not machine.has("postgresql")


def test_as_another_user_a_missing_ip_is_no_reason_to_stop(tmp_path: Path) -> None:
    machine = _machine(tmp_path, uid=1000)
    machine.give("chromium", "postgresql", "valgrind", "prometheus")
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls() == []


def test_with_everything_there_it_does_nothing(tmp_path: Path) -> None:
    machine = _machine(tmp_path, uid=0)
    machine.give("chromium", "postgresql", "valgrind", "prometheus", "ip")
    done = machine.run()
    assert done.returncode == 0 and machine.apt_calls() == []


def test_as_root_a_missing_valgrind_is_installed_for_the_instruction_gate(tmp_path: Path) -> None:
    machine = _machine(tmp_path, uid=0)
    machine.give("chromium", "postgresql", "prometheus", "ip")
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls() == ["update", "install -y valgrind"]
    assert machine.has("valgrind")


def test_as_another_user_a_missing_valgrind_stops_with_the_command(tmp_path: Path) -> None:
    machine = _machine(tmp_path, uid=1000)
    machine.give("chromium", "postgresql", "prometheus")
    done = machine.run()
    assert done.returncode == 1
    assert "sudo apt-get install -y valgrind " in done.stderr
