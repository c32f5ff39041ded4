"""Shared host-name answers: the clients of one gateway agent ask once per host, not once per AID."""

from __future__ import annotations

import asyncio
import contextvars
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aun_core.errors import ConnectionError as ClientConnectionError
from aun_core.net import DnsResilientNet

from aun_runtime.network._name_answers import HostAnswers, share_host_answers

# RFC 6761: names under .invalid never resolve, on any machine.
NOWHERE = "pki.aun-runtime-test.invalid"


async def fetch(url: str) -> bytes:
    # A session of its own per request, with aiohttp's default resolver, as the AUN client makes them.
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.read()


def in_fresh_context(coroutine: object) -> asyncio.Task[object]:
    return asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())  # type: ignore[arg-type]


@pytest.fixture
async def server() -> AsyncIterator[int]:
    app = web.Application()

    async def served(request: web.Request) -> web.Response:
        return web.json_response({"served": request.path})

    app.router.add_get("/trust-root.json", served)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    await runner.cleanup()


async def test_concurrent_lookups_of_a_host_that_does_not_resolve_are_one() -> None:
    answers = HostAnswers()

    async def twenty_clients() -> list[object]:
        assert share_host_answers(answers)
        return await asyncio.gather(*(fetch(f"http://{NOWHERE}/agent.md") for _ in range(20)), return_exceptions=True)

    results = await in_fresh_context(twenty_clients())
    assert answers.lookups == 1
    assert isinstance(results, list) and len(results) == 20
    for result in results:  # each fails as with its own lookup: a DNS error
        assert isinstance(result, aiohttp.ClientConnectorDNSError)


async def test_the_client_network_helper_fails_as_after_its_own_failed_lookup(tmp_path: Path) -> None:
    answers = HostAnswers()

    async def helpers() -> list[object]:
        share_host_answers(answers)
        nets = [DnsResilientNet(tmp_path / f"aid{i}") for i in range(5)]
        return await asyncio.gather(*(net.http_get(f"https://{NOWHERE}/trust-root.json") for net in nets),
                                    return_exceptions=True)

    results = await in_fresh_context(helpers())
    assert answers.lookups == 1
    for result in results:  # type: ignore[attr-defined]
        assert isinstance(result, ClientConnectionError)
        assert f"DNS failed and no cached IP for {NOWHERE}" in str(result)


async def test_a_host_that_resolves_is_asked_once_and_fetched_as_before(server: int) -> None:
    answers = HostAnswers()

    async def five_clients() -> list[bytes]:
        share_host_answers(answers)
        return await asyncio.gather(*(fetch(f"http://localhost:{server}/trust-root.json") for _ in range(5)))

    pages = await in_fresh_context(five_clients())
    assert pages == [b'{"served": "/trust-root.json"}'] * 5
    assert answers.lookups == 1


async def test_lookups_outside_the_sharing_tasks_are_untouched() -> None:
    answers = HostAnswers()

    async def sharing() -> None:
        share_host_answers(answers)
        with pytest.raises(aiohttp.ClientConnectorDNSError):
            await fetch(f"http://{NOWHERE}/agent.md")

    await in_fresh_context(sharing())
    assert answers.lookups == 1

    async def plain() -> None:  # a plain client of the same process: its own lookup, every time
        for _ in range(2):
            with pytest.raises(aiohttp.ClientConnectorDNSError):
                await fetch(f"http://{NOWHERE}/agent.md")

    await in_fresh_context(plain())
    assert answers.lookups == 1


async def test_a_stale_answer_is_asked_again() -> None:
    answers = HostAnswers(ttl=0.0)

    async def three_in_turn() -> None:
        share_host_answers(answers)
        for _ in range(3):
            with pytest.raises(aiohttp.ClientConnectorDNSError):
                await fetch(f"http://{NOWHERE}/agent.md")

    await in_fresh_context(three_in_turn())
    assert answers.lookups == 3


async def test_answers_are_bounded_and_negative_ones_raise_fresh_errors() -> None:
    answers = HostAnswers(max_hosts=2)
    asked: list[str] = []

    def lookup(host: str):  # type: ignore[no-untyped-def]
        async def ask() -> list[dict[str, object]]:
            asked.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return ask

    errors = []
    for host in ("a.invalid", "b.invalid", "c.invalid", "c.invalid", "a.invalid"):
        with pytest.raises(socket.gaierror) as raised:
            await answers.resolve(host, 80, socket.AF_INET, lookup(host))
        errors.append(raised.value)
    assert asked == ["a.invalid", "b.invalid", "c.invalid", "a.invalid"]  # c kept; a, the oldest, went first
    assert errors[2] is not errors[3] and errors[3].args == errors[2].args
