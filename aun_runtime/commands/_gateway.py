"""`aun-runtime gateway`: run a local AUN gateway until interrupted, and say how to reach it.

It prints the gateway URL, the issuer domain and where the development root certificate is, which is
all an AUN client needs (see docs/gateway.md). `--json` prints the same as
one JSON line instead, for scripts and supervisors that start the gateway as a subprocess.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..gateway._limits import GatewayLimits
from ..gateway._server import GatewayServer
from ..operating._command_errors import port_number
from ..operating._probes import Readiness, add_http_option, serving_probes
from ..operating._stopping import StopRequest, run_command
from ._table import Command

__all__ = ["GATEWAY", "run_gateway"]

DEFAULT_PORT = 20001
DEFAULT_DATA = "aun-gateway-data"


def _gateway_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"port; 0 picks a free one (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--data",
        default=DEFAULT_DATA,
        help=f"data directory: SQLite file and PKI (default: ./{DEFAULT_DATA})",
    )
    parser.add_argument(
        "--issuer",
        default=None,
        help="AID domain, fixed at the first start of a data directory (default: aun.localhost)",
    )
    parser.add_argument(
        "--rate", type=float, default=None, help="requests per second per connection (default: 500)"
    )
    parser.add_argument("--json", action="store_true", help="print the connection details as one JSON line")
    add_http_option(parser)


def _describe(info: dict[str, Any]) -> str:
    return "\n".join(
        [
            "AUN gateway running",
            f"  gateway URL  {info['gateway_url']}",
            f"  issuer       {info['issuer']}   (register AIDs as <name>.{info['issuer']})",
            f"  root CA      {info['root_ca_path']}   (clients trust it: AIDStore(..., root_ca_path=...))",
            f"  data         {info['data_dir']}",
            "Stop with Ctrl+C.",
        ]
    )


async def serve(stop: StopRequest, args: argparse.Namespace) -> int:
    limits = (
        GatewayLimits()
        if args.rate is None
        else GatewayLimits(rate_per_second=args.rate, rate_burst=max(1, int(args.rate * 2)))
    )
    readiness = Readiness()
    serving = False
    readiness.require("gateway", lambda: None if serving else "the gateway is not serving")
    async with (
        serving_probes(args, readiness),
        GatewayServer(args.host, args.port, data_dir=Path(args.data), issuer=args.issuer, limits=limits) as server,
    ):
        serving = True
        readiness.started()
        info = server.describe()
        print(json.dumps(info) if args.json else _describe(info), flush=True)
        await stop.wait()
        serving = False
    return stop.exit_code(failed=False)


def run_gateway(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; a data directory or address it cannot use raises `GatewayStartError`."""
    return run_command(lambda stop: serve(stop, args), serving=True)


#: `aun-runtime gateway`.
GATEWAY = Command(
    "gateway",
    help="run a local AUN gateway (WebSocket JSON-RPC + PKI over HTTP on one port)",
    options=_gateway_options,
    run=run_gateway,
)
