"""The deploy files (deploy/: Dockerfile, compose file, Kubernetes manifests) use only what the
command line has: every command, every AUN_* variable (an option of the command it configures),
every probe path, and probe ports that match the `--http` address. Images cannot be built here;
this is what can be checked of them."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry

from aun_runtime.cli import main
from aun_runtime.operating._probes import Readiness, add_probe_routes

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMMANDS = ("run", "worker", "host", "gateway", "console")
#: Variables the files use that are not options: the image's own, the database's, OpenTelemetry's.
NOT_OPTIONS = re.compile(r"^(PYTHON\w*|PIP_\w+|HEALTHCHECK_URL|POSTGRES_\w+|OTEL_\w+)$")


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(out.getvalue().split())


HELP = {command: _help(command) for command in COMMANDS} | {"": _help()}


def served_paths() -> set[str]:
    app = web.Application()
    add_probe_routes(app, Readiness(), CollectorRegistry())
    return {resource.canonical for resource in app.router.resources()}


def _containers() -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(where, command, environment, container or service) of every runtime process the files run."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        if service.get("image") == "aun-runtime":
            yield f"compose {name}", service["command"][0], dict(service.get("environment", {})), service
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document["kind"] == "Deployment":
                for container in document["spec"]["template"]["spec"]["containers"]:
                    env = {item["name"]: item.get("value") for item in container.get("env", [])}
                    yield f"{path.name} {container['name']}", container["args"][0], env, container


def _dockerfile_env() -> dict[str, str]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    return dict(re.findall(r"(\w+)=(\S+)", " ".join(line[4:] for line in text.splitlines() if line.startswith("ENV "))))


def _means_option(command: str, variable: str) -> bool:
    return f"[env {variable}]" in HELP[command] or f"[env {variable}]" in HELP[""]


def test_every_variable_is_an_option_of_the_command_it_configures() -> None:
    image = _dockerfile_env()
    checked = 0
    for where, command, env, _ in _containers():
        assert command in COMMANDS, f"{where}: no command {command!r}"
        for variable in {**image, **env}:
            if NOT_OPTIONS.match(variable):
                continue
            if variable in image and variable not in env and not _means_option(command, variable):
                continue  # the image's default for the commands that have it (the console serves on its own port)
            assert _means_option(command, variable), f"{where}: {command} has no option for {variable}"
            checked += 1
    assert checked >= 20
    assert all(any(_means_option(c, v) for c in COMMANDS) for v in image if not NOT_OPTIONS.match(v))


def test_every_probe_is_a_path_the_command_serves_on_the_port_it_serves_it() -> None:
    paths = served_paths()
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    image = _dockerfile_env()
    probes = 0
    for where, command, env, container in _containers():
        for kind in ("livenessProbe", "readinessProbe"):
            probe = container.get(kind)
            if probe is None:
                continue
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            if "grpc" in probe:  # the host's standard gRPC health service, on its address
                assert command == "host" and env["AUN_ADDRESS"].endswith(f":{probe['grpc']['port']}"), where
                continue
            get = probe["httpGet"]
            assert get["path"] in paths, f"{where}: {get['path']} is not served"
            port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
            listen = env.get("AUN_HTTP", image["AUN_HTTP"]) if command != "console" else f":{env['AUN_PORT']}"
            assert listen.endswith(f":{port}"), f"{where}: probes on {listen}, probed on {port}"
            probes += 1
    assert probes >= 6
    assert "/healthz" in (DEPLOY / "Dockerfile").read_text() and image["AUN_HTTP"] == ":9090"


def test_the_image_runs_the_command_line_as_a_user_not_root() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["aun-runtime"]' in text
    assert re.search(r"^USER (?!root)\w+", text, re.MULTILINE)
    assert "HEALTHCHECK" in text and "slim" in text.splitlines()[2]


def test_the_apps_the_files_name_exist() -> None:
    import importlib.util
    import sys

    sys.path.insert(0, str(DEPLOY / "app"))
    try:
        for where, _, env, _ in _containers():
            if "AUN_APP" in env:
                module, _, function = env["AUN_APP"].partition(":")
                spec = importlib.util.find_spec(module)
                assert spec is not None and spec.origin is not None, where
                assert f"async def {function}(" in Path(spec.origin).read_text(), where
    finally:
        sys.path.remove(str(DEPLOY / "app"))
