"""The HTTP half of the port: certificates, chain, CRL, OCSP, health, discovery; the PKI's persistence."""

from __future__ import annotations

import base64
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import ocsp
from cryptography.x509.oid import NameOID

from aun_runtime.gateway import GatewayServer, GatewayStartError

from .conftest import raw_register, unique_name


async def _get(url: str, method: str = "GET") -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.request(method, url) as response:
        return response.status, await response.text()


async def test_certificates_chain_to_the_root_a_client_is_given(gateway: GatewayServer) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    status, pem = await _get(f"{gateway.http_url}/pki/cert/{me.aid}")
    assert status == 200
    leaf = x509.load_pem_x509_certificate(pem.encode())
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == me.aid
    _, chain_text = await _get(f"{gateway.http_url}/pki/chain")
    issuer, root = x509.load_pem_x509_certificates(chain_text.encode())
    leaf.verify_directly_issued_by(issuer)
    issuer.verify_directly_issued_by(root)
    assert root == x509.load_pem_x509_certificate(gateway.root_ca_path.read_bytes())
    assert (await _get(f"{gateway.http_url}/pki/cert/{me.aid}", "HEAD"))[0] == 200


async def test_unknown_certificates_are_404_and_fingerprints_select(gateway: GatewayServer) -> None:
    assert (await _get(f"{gateway.http_url}/pki/cert/nobody.{gateway.issuer}"))[0] == 404
    assert (await _get(f"{gateway.http_url}/pki/cert/nobody.{gateway.issuer}", "HEAD"))[0] == 404
    me = await raw_register(gateway, unique_name("alice"))
    digest = me.fingerprint.removeprefix("sha256:")
    for fingerprint in (f"sha256:{digest}", f"sha256:{digest[:16]}"):
        status, pem = await _get(f"{gateway.http_url}/pki/cert/{me.aid}?cert_fingerprint={fingerprint}")
        assert status == 200 and pem == me.cert_pem
    assert (await _get(f"{gateway.http_url}/pki/cert/{me.aid}?cert_fingerprint=sha256:{'0' * 64}"))[0] == 404


async def test_revocation_endpoints_are_signed_by_the_issuer(gateway: GatewayServer) -> None:
    me = await raw_register(gateway, unique_name("alice"))
    _, chain_text = await _get(f"{gateway.http_url}/pki/chain")
    issuer = x509.load_pem_x509_certificates(chain_text.encode())[0]
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{gateway.http_url}/pki/crl.json") as response:
            crl = x509.load_pem_x509_crl((await response.json())["crl_pem"].encode())
        assert crl.is_signature_valid(issuer.public_key()) and len(crl) == 0  # type: ignore[arg-type]
        leaf = x509.load_pem_x509_certificate(me.cert_pem.encode())
        async with session.get(f"{gateway.http_url}/pki/ocsp/{leaf.serial_number:x}") as response:
            body = await response.json()
    answer = ocsp.load_der_ocsp_response(base64.b64decode(body["ocsp_response"]))
    assert body["status"] == "good" and answer.certificate_status == ocsp.OCSPCertStatus.GOOD
    assert answer.serial_number == leaf.serial_number and isinstance(answer.hash_algorithm, hashes.SHA256)
    issuer_key = issuer.public_key()
    assert isinstance(issuer_key, ec.EllipticCurvePublicKey)
    issuer_key.verify(answer.signature, answer.tbs_response_bytes, ec.ECDSA(hashes.SHA256()))
    assert (await _get(f"{gateway.http_url}/pki/ocsp/abcdef0123"))[0] == 404
    assert (await _get(f"{gateway.http_url}/pki/ocsp/not-hex"))[0] == 400


async def test_health_and_discovery(gateway: GatewayServer) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{gateway.http_url}/health") as response:
            health = await response.json()
        async with session.get(f"{gateway.http_url}/.well-known/aun-gateway") as response:
            discovery = await response.json()
    assert health["status"] == "ok" and health["issuer"] == gateway.issuer
    assert discovery["gateways"] == [{"url": gateway.url, "priority": 1}]


async def test_pki_and_issuer_persist_in_the_data_directory(tmp_path: Path) -> None:
    async with GatewayServer(port=0, data_dir=tmp_path / "gw", issuer="team.test") as first:
        root = first.root_ca_path.read_bytes()
        assert first.issuer == "team.test"
        me = await raw_register(first, unique_name("alice"))
    async with GatewayServer(port=0, data_dir=tmp_path / "gw") as second:
        assert second.issuer == "team.test" and second.root_ca_path.read_bytes() == root
        assert (await _get(f"{second.http_url}/pki/cert/{me.aid}"))[1] == me.cert_pem
    with pytest.raises(GatewayStartError, match=r"team\.test"):
        await GatewayServer(port=0, data_dir=tmp_path / "gw", issuer="other.test").start()


async def test_port_in_use_is_a_start_error(gateway: GatewayServer, tmp_path: Path) -> None:
    with pytest.raises(GatewayStartError, match="cannot listen"):
        await GatewayServer(port=gateway.port, data_dir=tmp_path / "second").start()
