"""An app written outside the repo type-checks against the installed packages: the editable
install is a plain path entry that mypy (and IDEs) follow, and the three packages ship py.typed."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MYPY = Path(sys.executable).with_name("mypy")

APP = '''\
from __future__ import annotations

from autogen_core.models import ChatCompletionClient

from agents.autonomous import AutonomousAgent
from aun_runtime import AUNAgent, AUNMessage, AUNRuntime
from protocols.aun import DispatchMode, validate_aid


class Greeter(AUNAgent):
    async def on_start(self) -> None:
        await self.group_send("lobby", "hello")


def helper(model: ChatCompletionClient) -> AutonomousAgent:
    return AutonomousAgent(model, instructions="Answer questions.")


async def app(runtime: AUNRuntime) -> None:
    await runtime.register_agent(validate_aid("greeter.local"), Greeter)
    mode: DispatchMode = DispatchMode("mention")
    first: AUNMessage | None = None
    print(mode, first)
'''


def test_an_app_outside_the_repo_passes_mypy_strict() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        assert not Path(tmp).resolve().is_relative_to(REPO)
        (Path(tmp) / "myteam.py").write_text(APP)
        done = subprocess.run(
            [str(MYPY), "--strict", "--no-incremental", "myteam.py"],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Cannot find implementation or library stub" not in done.stdout
