"""``GET|HEAD|PUT /agent.md`` addressed by ``Host: <aid>``: publishing is the logged-in AID's alone,
cards are bounded and checked, ``meta.status`` reports the declared behaviour mode, and a restarted
gateway still serves what was published."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from aun_runtime.gateway import GatewayServer
from aun_runtime.gateway._agent_cards import MAX_CARD_BYTES

from .conftest import RawIdentity, raw_register, unique_name


def card_for(aid: str, *, mode: str = "autonomous", body: str = "# Card\n") -> bytes:
    return (f'---\naid: "{aid}"\nname: "Card"\ntype: "agent"\nversion: "1.0.0"\n'
            f'description: "A card"\nbehavior_mode: "{mode}"\n---\n{body}').encode()


async def put(server: GatewayServer, host: str, body: bytes, token: str | None = None,
              **headers: str) -> tuple[int, dict[str, Any]]:
    sent = {"Host": host, "Content-Type": "text/markdown; charset=utf-8", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with aiohttp.ClientSession() as session, session.put(
        f"{server.http_url}/agent.md", data=body, headers=sent
    ) as answer:
        return answer.status, await answer.json()


async def get(server: GatewayServer, host: str, method: str = "GET") -> tuple[int, bytes, Mapping[str, str]]:
    async with aiohttp.ClientSession() as session, session.request(
        method, f"{server.http_url}/agent.md", headers={"Host": host}
    ) as answer:
        return answer.status, await answer.read(), answer.headers.copy()


@pytest.fixture
async def alice(gateway: GatewayServer) -> RawIdentity:
    return await raw_register(gateway, unique_name("alice"))


async def test_the_owner_publishes_its_card_and_anyone_reads_it_back(gateway: GatewayServer, alice: RawIdentity) -> None:
    assert (await get(gateway, alice.aid))[0] == 404  # nothing published yet
    body = card_for(alice.aid)
    status, answer = await put(gateway, f"{alice.aid}:{gateway.port}", body, alice.access_token)  # a port is ignored
    assert status == 201 and answer["aid"] == alice.aid and answer["behavior_mode"] == "autonomous"
    status, served, headers = await get(gateway, alice.aid)
    assert status == 200 and served == body and headers["ETag"] == answer["etag"]
    assert headers["Content-Type"].startswith("text/markdown") and headers["Cache-Control"] == "no-cache"
    head_status, head_body, head_headers = await get(gateway, alice.aid, "HEAD")
    assert head_status == 200 and head_body == b"" and head_headers["ETag"] == answer["etag"]

    conn = await alice.connect(gateway)
    status_answer = (await conn.call("meta.status"))["result"]
    await conn.close()
    assert status_answer["mode"] == "gateway"  # the connection's topology, as before
    assert status_answer["behavior_mode"] == "autonomous" and status_answer["agent_md_etag"] == answer["etag"]


async def test_meta_status_declares_nothing_for_an_aid_without_a_card(gateway: GatewayServer, alice: RawIdentity) -> None:
    conn = await alice.connect(gateway)
    answer = (await conn.call("meta.status"))["result"]
    await conn.close()
    assert "behavior_mode" not in answer and "agent_md_etag" not in answer


async def test_nobody_publishes_a_card_for_an_aid_they_are_not_logged_in_as(
    gateway: GatewayServer, alice: RawIdentity
) -> None:
    mallory = await raw_register(gateway, unique_name("mallory"))
    status, answer = await put(gateway, alice.aid, card_for(alice.aid), mallory.access_token)
    assert status == 403 and answer["error"]["code"] == "not_owner"
    status, answer = await put(gateway, alice.aid, card_for(alice.aid))
    assert status == 401 and answer["error"]["code"] == "token_invalid"
    status, answer = await put(gateway, alice.aid, card_for(alice.aid), "not-a-token")
    assert status == 401 and answer["error"]["code"] == "token_invalid"
    # Logged in as itself, but the card speaks for someone else.
    status, answer = await put(gateway, mallory.aid, card_for(alice.aid), mallory.access_token)
    assert status == 403 and answer["error"]["code"] == "aid_mismatch"
    assert (await get(gateway, alice.aid))[0] == 404


@pytest.mark.parametrize(("body", "status", "code"), [
    (b"x" * (MAX_CARD_BYTES + 1), 413, "too_large"),
    (None, 413, "too_large"),  # a document over the agent.md limit, even within the body bound
    (b"# no front matter\n", 400, "invalid"),
    (b'---\naid: "{aid}"\nname: "Card"\n---\n', 400, "invalid"),  # no type, no version
    (b"---\n[not, a, mapping]\n---\n", 400, "invalid"),
    (b"\xff\xfe---\n", 400, "invalid"),
])
async def test_an_oversize_or_invalid_card_is_refused(
    gateway: GatewayServer, alice: RawIdentity, body: bytes | None, status: int, code: str
) -> None:
    payload = card_for(alice.aid, body="x" * 4100 + "\n") if body is None else body.replace(b"{aid}", alice.aid.encode())
    got, answer = await put(gateway, alice.aid, payload, alice.access_token)
    assert (got, answer["error"]["code"]) == (status, code)
    assert (await get(gateway, alice.aid))[0] == 404


async def test_conditions_keep_a_writer_from_replacing_a_card_it_has_not_seen(
    gateway: GatewayServer, alice: RawIdentity
) -> None:
    _, first = await put(gateway, alice.aid, card_for(alice.aid), alice.access_token, **{"If-None-Match": "*"})
    status, answer = await put(gateway, alice.aid, card_for(alice.aid, body="# v2\n"), alice.access_token,
                               **{"If-None-Match": "*"})
    assert status == 412 and answer["error"]["code"] == "exists"
    status, answer = await put(gateway, alice.aid, card_for(alice.aid, body="# v2\n"), alice.access_token,
                               **{"If-Match": '"stale"'})
    assert status == 412 and answer["error"]["code"] == "etag_mismatch"
    status, answer = await put(gateway, alice.aid, card_for(alice.aid, body="# v2\n"), alice.access_token,
                               **{"If-Match": first["etag"]})
    assert status == 200 and answer["etag"] != first["etag"]
    assert (await get(gateway, alice.aid))[1].endswith(b"# v2\n")  # one card per AID: replaced


async def test_a_host_that_is_not_an_aid_of_this_gateway_has_no_card(gateway: GatewayServer, alice: RawIdentity) -> None:
    assert (await get(gateway, "127.0.0.1"))[0] == 404
    status, answer = await put(gateway, "someone.elsewhere.example", card_for(alice.aid), alice.access_token)
    assert status == 400 and answer["error"]["code"] == "bad_host"


async def test_a_restarted_gateway_serves_the_cards_it_stored(tmp_path: Path) -> None:
    data = tmp_path / "gateway"
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as server:
        alice = await raw_register(server, unique_name("alice"))
        body = card_for(alice.aid)
        assert (await put(server, alice.aid, body, alice.access_token))[0] == 201
    async with GatewayServer("127.0.0.1", port=0, data_dir=data) as server:
        status, served, _ = await get(server, alice.aid)
        assert status == 200 and served == body
        conn = await alice.connect(server)
        assert (await conn.call("meta.status"))["result"]["behavior_mode"] == "autonomous"
        await conn.close()
