"""The HTTP side of the gateway's port: certificates, chain, revocation status, health, discovery.

The AUN client derives these URLs from the gateway URL (`ws` -> `http`, same host and port):

- `GET|HEAD /pki/cert/{aid}[?cert_fingerprint=sha256:<hex>]`: the AID's certificate (PEM), 404
  if unknown. Registration starts by expecting 404 here.
- `GET /pki/chain`: issuer and root (PEM), the chain every certificate here is checked against.
- `GET /pki/crl.json`: `{"crl_pem"}`, a CRL signed by the issuer.
- `GET /pki/ocsp/{serial_hex}`: `{"status", "ocsp_response"}`, signed by the issuer.
- `GET /health`: liveness and a few counters (WebSocket sessions, TCP connections, online AIDs).
- `GET /.well-known/aun-gateway`: `{"gateways": [{"url", "priority"}]}` for real discovery.

Agent cards (`GET|HEAD|PUT /agent.md` with `Host: <aid>`) are in `._agent_md_http`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aiohttp import web

from ._gateway_core import GatewayCore
from ._group_aid_cards import authoritative_cert_headers

__all__ = ["add_http_routes"]

_SERIAL = re.compile(r"^[0-9a-fA-F]{1,40}$")
_PEM = "application/x-pem-file"


def add_http_routes(app: web.Application, core: GatewayCore, open_connections: Callable[[], int] = lambda: 0) -> None:
    """Register the HTTP endpoints (GET also answers HEAD). `open_connections` counts TCP connections."""

    async def cert(request: web.Request) -> web.Response:
        aid = request.match_info["aid"].strip().lower()
        fingerprint = request.query.get("cert_fingerprint", "")
        record = core.identities.by_fingerprint(aid, fingerprint) if fingerprint else core.identities.current(aid)
        if record is None:
            return web.Response(status=404, text=f"no certificate for {aid}\n")
        authoritative = request.query.get("consistency") == "authoritative"
        return web.Response(text=record.pem, content_type=_PEM,
                            headers=authoritative_cert_headers(record) if authoritative else None)

    async def chain(request: web.Request) -> web.Response:
        return web.Response(text=core.pki.chain_pem, content_type=_PEM)

    async def crl(request: web.Request) -> web.Response:
        return web.json_response({"crl_pem": core.pki.crl_pem(core.identities.revoked_serials())})

    async def ocsp_status(request: web.Request) -> web.Response:
        serial = request.match_info["serial"]
        if not _SERIAL.match(serial):
            return web.json_response({"status": "unknown", "error": "serial must be hex"}, status=400)
        if int(serial, 16) == core.pki.auth_cert.serial_number:
            cert, revoked = core.pki.auth_cert, False
        else:
            record = core.identities.by_serial(serial)
            if record is None:
                return web.json_response({"status": "unknown"}, status=404)
            cert, revoked = record.cert, record.revoked
        return web.json_response({
            "status": "revoked" if revoked else "good", "ocsp_response": core.pki.ocsp_response(cert, revoked),
        })

    async def health(request: web.Request) -> web.Response:
        return web.json_response({
            "status": "ok", "issuer": core.issuer, "connections": len(core.all_sessions),
            "tcp_connections": open_connections(), "online_aids": len(core.online_aids()),
        })

    async def discovery(request: web.Request) -> web.Response:
        scheme = "wss" if request.secure else "ws"
        return web.json_response({
            "gateways": [{"url": f"{scheme}://{request.host}/aun", "priority": 1}], "issuer": core.issuer,
        })

    app.router.add_get("/pki/cert/{aid}", cert)
    app.router.add_get("/pki/chain", chain)
    app.router.add_get("/pki/crl.json", crl)
    app.router.add_get("/pki/ocsp/{serial}", ocsp_status)
    app.router.add_get("/health", health)
    app.router.add_get("/.well-known/aun-gateway", discovery)
