"""The gateway page's client example (docs/gateway.md), run as written against a gateway (only the URL and root path change)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aun_runtime.gateway import GatewayServer

PAGE = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"


def _example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- gateway-client-example", 1)[1].split("```python\n", 1)[1]
    return block.split("```", 1)[0]


async def test_readme_client_example_runs_against_the_gateway(gateway: GatewayServer, tmp_path: Path) -> None:
    example = _example()
    code = example.replace('"ws://127.0.0.1:20001/aun"', repr(gateway.url)).replace(
        '"aun-gateway-data/pki/root.pem"', repr(str(gateway.root_ca_path)))
    assert code.count(repr(gateway.url)) == 1 and code.count(repr(str(gateway.root_ca_path))) == 1
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, err.decode()[-2000:]
    assert "alice.aun.localhost says hello" in out.decode()
    assert gateway.events.find("message.stored", sender="alice.aun.localhost", to="bobby.aun.localhost")
