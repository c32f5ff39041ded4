"""``make test`` installs Debian's chromium itself: as root with apt-get, otherwise it says how.

The package manager is replaced by a stub script on ``PATH`` (installing a browser in a unit test
is neither possible nor wanted); ``.ci/run`` on a fresh machine is the real check.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install-test-deps.sh"


def _stubs(tmp_path: Path, uid: int) -> tuple[dict[str, str], Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    chromium = tmp_path / "chromium"
    calls = tmp_path / "apt-get.calls"
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'if [ "$1" = install ]; then printf "#!/bin/sh\\n" > {chromium}; chmod +x {chromium}; fi\n'
    )
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "AUN_CHROMIUM": str(chromium)}
    return env, chromium, calls


def test_as_root_it_installs_chromium_with_apt_get(tmp_path: Path) -> None:
    env, chromium, calls = _stubs(tmp_path, uid=0)
    done = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == ["update", "install -y chromium"]
    assert os.access(chromium, os.X_OK)


def test_as_another_user_it_stops_at_once_with_the_command_to_run(tmp_path: Path) -> None:
    env, chromium, calls = _stubs(tmp_path, uid=1000)
    done = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "sudo apt-get install -y chromium" in done.stderr
    assert not calls.exists() and not chromium.exists()


def test_with_chromium_there_it_does_nothing(tmp_path: Path) -> None:
    env, chromium, calls = _stubs(tmp_path, uid=0)
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    done = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and not calls.exists()
