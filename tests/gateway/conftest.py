"""Fixtures for the gateway tests: a server on port 0, real fastaun clients, and a raw wire client.

Every client gets its own ``aun_path`` in the test's tmp dir, is pointed at the gateway through the
SDK's own per-AID ``gateway_url`` metadata and trusts the gateway's development root through
``root_ca_path``: the public knobs, no monkeypatching.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import websockets
from aun_core import AIDStore, AUNClient
from aun_core.keystore.local_identity_store import LocalIdentityStore
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from aun_runtime.gateway import GatewayLimits, GatewayServer

SEED = "test-seed"
_names = itertools.count(1)


def unique_name(prefix: str) -> str:
    return f"{prefix}{next(_names):03d}"


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[GatewayServer]:
    async with GatewayServer("127.0.0.1", port=0, data_dir=tmp_path / "gateway") as server:
        yield server


class Events:
    """Collects one client event kind into a queue, so a test waits for arrivals instead of sleeping."""

    def __init__(self, client: AUNClient, event: str) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        client.on(event, self.queue.put_nowait)

    async def next(self, timeout: float = 15.0) -> dict[str, Any]:
        return await asyncio.wait_for(self.queue.get(), timeout)

    async def take(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return [await self.next(timeout) for _ in range(count)]

    def drain(self) -> list[dict[str, Any]]:
        items = []
        while not self.queue.empty():
            items.append(self.queue.get_nowait())
        return items


AgentFactory = Callable[..., Awaitable[AUNClient]]


async def register_client(server: GatewayServer, home: Path, name: str) -> AUNClient:
    """Register ``name.<issuer>`` with the real client (if not yet) and return an unconnected client."""
    aid = f"{name}.{server.issuer}"
    path = home / name
    LocalIdentityStore(str(path), encryption_seed=SEED).set_metadata_value(aid, "gateway_url", server.url)
    store = AIDStore(path, SEED, root_ca_path=str(server.root_ca_path))
    if not store.load(aid).ok:
        registered = await store.register(aid, type="agent")
        assert registered.ok, registered.error
    loaded = store.load(aid)
    assert loaded.ok and loaded.data is not None, loaded.error
    return AUNClient(loaded.data["aid"])


@pytest.fixture
async def make_agent(gateway: GatewayServer, tmp_path: Path) -> AsyncIterator[AgentFactory]:
    """``client = await make_agent("alice")``: a registered real client (connected unless told not to)."""
    clients: list[AUNClient] = []

    async def make(name: str, *, connect: bool = True) -> AUNClient:
        client = await register_client(gateway, tmp_path / "agents", name)
        clients.append(client)
        if connect:
            await client.connect({"auto_reconnect": True})
        return client

    yield make
    for client in clients:
        await client.close()


MemberFactory = Callable[..., Awaitable[AUNClient]]


@pytest.fixture
async def make_member(gateway: GatewayServer, tmp_path: Path, make_agent: AgentFactory) -> AsyncIterator[MemberFactory]:
    """``await make_member("bob", 2, mode)``: a real client for the AID of ``make_agent("bob")``,
    from a copy of its key and certificate in a directory of its own (so its own device id), connected
    with ``delivery_mode`` ``mode``. Member 1 is the original directory."""
    clients: list[AUNClient] = []

    async def make(name: str, index: int, mode: dict[str, Any] | None, *, connect: bool = True,
                   on_message: Callable[[dict[str, Any]], Any] | None = None) -> AUNClient:
        aid = f"{name}.{gateway.issuer}"
        if index == 1:
            client = await make_agent(name, connect=False)
        else:
            source = tmp_path / "agents" / name / "AIDs" / aid
            home = tmp_path / "members" / f"{name}-{index}"
            for part in ("private", "public"):  # the AID's identity; not its device id, tokens or cursors
                shutil.copytree(source / part, home / "AIDs" / aid / part, dirs_exist_ok=True)
            LocalIdentityStore(str(home), encryption_seed=SEED).set_metadata_value(aid, "gateway_url", gateway.url)
            loaded = AIDStore(home, SEED, root_ca_path=str(gateway.root_ca_path)).load(aid)
            assert loaded.ok and loaded.data is not None, loaded.error
            client = AUNClient(loaded.data["aid"])
            clients.append(client)
        if on_message is not None:
            client.on("message.received", on_message)
        if connect:
            options: dict[str, Any] = {"auto_reconnect": True}
            if mode is not None:
                options["delivery_mode"] = mode
            await client.connect(options)
        return client

    yield make
    for client in clients:
        await client.close()


#: ``client, store = await owner("alice")``: see the ``owner`` fixture.
Owner = Callable[[str], Awaitable[tuple[AUNClient, AIDStore]]]


@pytest.fixture
async def owner(gateway: GatewayServer, tmp_path: Path) -> AsyncIterator[Owner]:
    """``client, store = await owner("alice")``: a connected real client and the AID store it came
    from, which ``create_group`` keeps the group's identity in."""
    clients: list[AUNClient] = []

    async def make(name: str) -> tuple[AUNClient, AIDStore]:
        aid, path = f"{name}.{gateway.issuer}", tmp_path / "owners" / name
        LocalIdentityStore(str(path), encryption_seed=SEED).set_metadata_value(aid, "gateway_url", gateway.url)
        store = AIDStore(path, SEED, root_ca_path=str(gateway.root_ca_path))
        assert (await store.register(aid, type="agent")).ok
        loaded = store.load(aid)
        assert loaded.ok and loaded.data is not None
        client = AUNClient(loaded.data["aid"])
        clients.append(client)
        await client.connect({"auto_reconnect": True})
        return client, store

    yield make
    for client in clients:
        await client.close()


# -- a raw wire client, for error codes and abuse ----------------------------------------------


class RawConnection:
    """One WebSocket to the gateway, speaking JSON-RPC by hand."""

    def __init__(self, ws: Any, challenge: dict[str, Any]) -> None:
        self.ws = ws
        self.challenge = challenge
        self._ids = itertools.count(1)
        self.pushes: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, server: GatewayServer) -> RawConnection:
        ws = await websockets.connect(server.url, max_size=4 * 1024 * 1024, ping_interval=None)
        challenge = json.loads(await ws.recv())
        assert challenge["method"] == "challenge"
        return cls(ws, challenge)

    async def send_text(self, text: str) -> dict[str, Any]:
        """Send a raw frame and return the next answer (pushes on the way are kept in ``pushes``)."""
        await self.ws.send(text)
        return await self.answer()

    async def answer(self, timeout: float = 10.0) -> dict[str, Any]:
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
            if "id" in frame:
                return dict(frame)
            self.pushes.append(frame)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": f"t-{next(self._ids)}", "method": method, "params": params or {}}
        return await self.send_text(json.dumps(request, ensure_ascii=False))

    async def close(self) -> None:
        await self.ws.close()


class RawIdentity:
    """An AID registered and logged in by hand (key, certificate, tokens), for crafting frames."""

    def __init__(self, aid: str, key: ec.EllipticCurvePrivateKey, cert_pem: str, access_token: str,
                 refresh_token: str) -> None:
        self.aid = aid
        self.key = key
        self.cert_pem = cert_pem
        self.access_token = access_token
        self.refresh_token = refresh_token

    @property
    def fingerprint(self) -> str:
        from cryptography import x509

        return "sha256:" + x509.load_pem_x509_certificate(self.cert_pem.encode()).fingerprint(hashes.SHA256()).hex()

    def sign(self, method: str, params: dict[str, Any], *, as_aid: str | None = None,
             timestamp: int | None = None) -> dict[str, Any]:
        """``params`` with a ``client_signature`` made the way the AUN client makes it."""
        from aun_runtime.gateway._signature import params_hash

        aid = as_aid or self.aid
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        digest = params_hash(params)
        signature = self.key.sign(f"{method}|{aid}|{stamp}|{digest}".encode(), ec.ECDSA(hashes.SHA256()))
        return {**params, "client_signature": {
            "aid": aid, "cert_fingerprint": self.fingerprint, "timestamp": stamp, "params_hash": digest,
            "signature": base64.b64encode(signature).decode(),
        }}

    async def connect(self, server: GatewayServer, device_id: str = "raw-device") -> RawConnection:
        conn = await RawConnection.open(server)
        answer = await conn.call("auth.connect", {
            "nonce": conn.challenge["params"]["nonce"], "auth": {"method": "kite_token", "token": self.access_token},
            "device": {"id": device_id, "type": "sdk"}, "client": {"slot_id": "default"},
        })
        assert answer.get("result", {}).get("status") == "ok", answer
        return conn


class PendingLogin:
    """An AID registered by hand, halfway through logging in (after ``auth.aid_login1``)."""

    def __init__(self, conn: RawConnection, aid: str, key: ec.EllipticCurvePrivateKey, cert_pem: str,
                 phase1: dict[str, Any]) -> None:
        self.conn, self.aid, self.key, self.cert_pem, self.phase1 = conn, aid, key, cert_pem, phase1

    def proof(self, signer: ec.EllipticCurvePrivateKey | None = None) -> dict[str, Any]:
        """``auth.aid_login2`` params, signed by the AID's key (or by ``signer``)."""
        client_time = str(time.time())
        signature = (signer or self.key).sign(f"{self.phase1['nonce']}:{client_time}".encode(), ec.ECDSA(hashes.SHA256()))
        return {"aid": self.aid, "request_id": self.phase1["request_id"], "nonce": self.phase1["nonce"],
                "client_time": client_time, "signature": base64.b64encode(signature).decode()}


def spki_b64(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode()


async def start_login(server: GatewayServer, name: str) -> PendingLogin:
    """Register ``name.<issuer>`` with a fresh key and run ``auth.aid_login1`` on a new socket."""
    aid = f"{name}.{server.issuer}"
    key = ec.generate_private_key(ec.SECP256R1())
    conn = await RawConnection.open(server)
    cert = (await conn.call("auth.create_aid", {"aid": aid, "public_key": spki_b64(key), "curve": "P-256"}))["result"]["cert"]
    phase1 = (await conn.call("auth.aid_login1", {"aid": aid, "cert": cert, "client_nonce": "n0nce"}))["result"]
    return PendingLogin(conn, aid, key, cert, phase1)


async def raw_register(server: GatewayServer, name: str) -> RawIdentity:
    """Register and log in ``name.<issuer>`` by hand: create_aid, aid_login1, aid_login2."""
    login = await start_login(server, name)
    phase2 = (await login.conn.call("auth.aid_login2", login.proof()))["result"]
    await login.conn.close()
    return RawIdentity(login.aid, login.key, login.cert_pem, phase2["access_token"], phase2["refresh_token"])


async def raw_member(server: GatewayServer, name: str) -> tuple[str, RawConnection]:
    """A new AID (a unique name from ``name``), registered by hand and connected: ``(aid, connection)``."""
    identity = await raw_register(server, unique_name(name))
    return identity.aid, await identity.connect(server)


def error_of(answer: dict[str, Any]) -> tuple[int, str | None]:
    """The JSON-RPC error code of ``answer`` and the parameter it names (``data.field``), if any."""
    assert "error" in answer, answer
    return answer["error"]["code"], answer["error"].get("data", {}).get("field")


async def refused(client: AUNClient, method: str, params: dict[str, Any]) -> int:
    """The error code the network answers ``client``'s ``method`` call with (it must refuse it)."""
    from aun_core import AUNError

    with pytest.raises(AUNError) as caught:
        await client.call(method, params)
    code = caught.value.code
    assert isinstance(code, int)
    return code


@pytest.fixture
def small_limits() -> GatewayLimits:
    return GatewayLimits(rate_per_second=5.0, rate_burst=5)
