"""Configuration, the optional client dependency, and ``aun-runtime demo --gateway`` as a user runs it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from aun_runtime import AUNRuntime
from aun_runtime.network import GatewayAgent, GatewayAgentConfig, GatewayAgentError, NetworkClientMissingError

from .conftest import REPO


def test_config_from_the_environment_with_arguments_winning() -> None:
    env = {
        "AUN_GATEWAY_URL": "wss://gateway.example.test/aun", "AUN_GATEWAY_DATA": "/srv/agents",
        "AUN_GATEWAY_EXPOSE": "coder.example.test, reviewer.example.test", "AUN_GATEWAY_ROOT_CA": "/etc/aun/root.pem",
        "AUN_GATEWAY_PLAINTEXT": "1", "AUN_GATEWAY_RECONNECT_MAX_DELAY": "2.5",
    }
    config = GatewayAgentConfig.from_env(env, data_dir=Path("/tmp/elsewhere"))
    assert config.gateway_url == "wss://gateway.example.test/aun" and config.data_dir == Path("/tmp/elsewhere")
    assert config.expose == ("coder.example.test", "reviewer.example.test")
    assert (config.root_ca_path, config.encrypt, config.reconnect_max_delay) == ("/etc/aun/root.pem", False, 2.5)
    default = GatewayAgentConfig.from_env({})
    assert default.gateway_url is None and default.encrypt is True and default.expose is None  # discovery, E2EE, all
    with pytest.raises(ValueError, match="client_log_level"):
        GatewayAgentConfig(client_log_level="loud")


def test_the_key_store_seed_is_made_once_and_kept_private(tmp_path: Path) -> None:
    config = GatewayAgentConfig(data_dir=tmp_path / "agents")
    seed = config.key_seed()
    assert len(seed) >= 32 and config.key_seed() == seed
    assert stat.S_IMODE((tmp_path / "agents" / "seed").stat().st_mode) == 0o600
    assert GatewayAgentConfig(data_dir=tmp_path / "agents", seed="given").key_seed() == "given"


async def test_only_registered_aids_can_be_exposed(tmp_path: Path) -> None:
    async with AUNRuntime(domain="aun.localhost") as runtime:
        agent = GatewayAgent(runtime, GatewayAgentConfig(data_dir=tmp_path, expose=("ghost.aun.localhost",)))
        with pytest.raises(GatewayAgentError, match="register it in the runtime first"):
            await agent.start()
        with pytest.raises(GatewayAgentError, match="not started"):
            await agent.call("ghost.aun.localhost", "meta.ping")


async def test_without_the_aun_client_the_gateway_agent_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "aun_core", None)  # as if fastaun were not installed
    async with AUNRuntime(domain="aun.localhost") as runtime:
        with pytest.raises(NetworkClientMissingError, match=r"aun-runtime\[gateway\]"):
            await GatewayAgent(runtime, GatewayAgentConfig(data_dir=tmp_path)).start()


def test_importing_the_runtime_never_imports_the_aun_client() -> None:
    code = ("import sys, aun_runtime, aun_runtime.cli, aun_runtime.gateway, aun_runtime.network; "
            "assert 'aun_core' not in sys.modules, 'aun_core imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_demo_gateway_shows_a_plain_clients_messages_arriving_and_exits() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUN_")}
    done = subprocess.run([sys.executable, "-m", "aun_runtime", "demo", "--gateway"], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "user.aun.localhost -> coder.aun.localhost [from outside; new conversation]: 'coding task fib" in out
    assert "reviewer.aun.localhost -> user.aun.localhost [re #" in out and "task fib approved after 2 round(s)" in out
    assert "user.aun.localhost -> quiet.aun.localhost [from outside; new conversation]" in out
    assert "delivered to quiet.aun.localhost · no reply" in out
    assert "the plain AUN client user.aun.localhost received 3 message(s):" in out
    assert "from reviewer.aun.localhost: 'task fib approved after 2 round(s)' (end-to-end encrypted)" in out
    assert "0 dead letters · 0 loop stops · 0 budget stops" in out
    assert "AUNClient initialized" not in done.stderr  # the client's chatter is kept off the terminal
