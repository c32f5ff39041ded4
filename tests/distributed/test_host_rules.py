"""The host's own rules: no RPC even from a plain autogen-ext worker, a directory, counters, TLS."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
from pathlib import Path

import pytest
from autogen_core import AgentId, MessageContext, RoutedAgent, event
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import BaseModel

from aun_runtime import AUNError, AUNRuntime, RPCForbiddenError, UnknownAIDError
from aun_runtime.distributed import (
    HostUnavailableError,
    OutboxFullError,
    TLSConfig,
    WorkerRuntime,
    worker_runtime,
)
from aun_runtime.testing import Recorder

from .processes import Process, start_host


class Ping(BaseModel):
    n: int


class Sink(RoutedAgent):
    @event
    async def on_ping(self, message: Ping, ctx: MessageContext) -> None:
        pass


async def test_the_host_refuses_an_rpc_from_a_plain_autogen_worker_at_once(host: str) -> None:
    from autogen_core import try_get_known_serializers_for_type

    callee = GrpcWorkerAgentRuntime(host)
    caller = GrpcWorkerAgentRuntime(host)
    for runtime in (callee, caller):
        runtime.add_message_serializer(try_get_known_serializers_for_type(Ping))
        await runtime.start()
    try:
        await Sink.register(callee, "sink", lambda: Sink("sink"))
        with pytest.raises(Exception, match="send_message is forbidden"):
            await asyncio.wait_for(caller.send_message(Ping(n=1), AgentId("sink", "default")), timeout=10)
    finally:
        await caller.stop()
        await callee.stop()


async def test_an_aid_held_by_a_live_worker_cannot_be_taken_by_another(host: str, tmp_path: Path) -> None:
    first = worker_runtime(host)
    await first.register_agent("only.local", Recorder)
    await first.start()
    second = worker_runtime(host, connect_timeout=5)
    await second.register_agent("only.local", Recorder)
    try:
        with pytest.raises(AUNError, match=r"only\.local"):
            await second.start()
        assert await first.ping("only.local") is True
    finally:
        await first.close()


async def test_send_message_on_a_worker_is_refused_before_anything_is_queued(host: str) -> None:
    runtime = worker_runtime(host)
    await runtime.register_agent("rec.local", Recorder)
    await runtime.start()
    try:
        with pytest.raises(RPCForbiddenError):
            await runtime.core.send_message("hi", AgentId("rec.local", "default"))
        assert runtime.core.stats.sent == 0  # type: ignore[attr-defined]
    finally:
        await runtime.close()


# -- TLS with a generated certificate ------------------------------------------------------------------


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aun test host")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "host.pem", directory / "host.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


async def test_tls_with_a_user_supplied_certificate(procs: list[Process], tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    process, address = start_host(extra=["--tls-cert", str(cert), "--tls-key", str(key)])
    procs.append(process)
    assert "(TLS)" in process.lines[0]

    runtime = worker_runtime(address, tls=TLSConfig(ca=cert))
    await runtime.register_agent("secure.local", Recorder)
    inbox = await runtime.open_inbox()
    await runtime.start()
    try:
        await inbox.send("secure.local", "over TLS")
        await asyncio.wait_for(runtime.settle(), 10)
        recorder = await runtime.agent_instance("secure.local", Recorder)
        assert [m.text for m in recorder.received] == ["over TLS"]
    finally:
        await runtime.close()

    plain = worker_runtime(address, connect_timeout=2)
    with pytest.raises(HostUnavailableError):
        await plain.start()


async def test_a_full_outbox_refuses_with_a_specific_error_and_a_dead_letter(host: str) -> None:
    runtime = AUNRuntime(core=WorkerRuntime(host, outbox_capacity=3))
    inbox = await runtime.open_inbox()
    await runtime.start()
    try:
        for n in range(3):  # nobody holds it: each is refused for now, and kept
            with pytest.raises(UnknownAIDError):
                await inbox.send("nobody.local", f"kept {n}")
        with pytest.raises(OutboxFullError, match="3 unacknowledged"):
            await inbox.send("nobody.local", "one too many")
        reasons = [r.reason or "" for r in runtime.archive.dead_letters()]
        assert sum("OutboxFullError" in r for r in reasons) == 1
        assert sum("is kept" in r for r in reasons) == 3
        assert runtime.core.stats.kept == 3  # type: ignore[attr-defined]
    finally:
        await runtime.close()
