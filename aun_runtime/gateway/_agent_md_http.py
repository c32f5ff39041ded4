"""`GET|HEAD|PUT /agent.md`: each AID's card, addressed by the `Host` header (Agent Web discovery).

The AUN client asks for a card at `/agent.md` with `Host: <aid>` (a port after the AID is
ignored), the way an Agent Web server tells its agents apart. Reading is open to anyone; `PUT`
needs `Authorization: Bearer <access token>` of the AID named in `Host` (of a bound group AID:
its owner's, and every answer about one carries the owner projection, see `._group_aid_cards`):
nobody publishes a card for an AID they are not logged in as. `If-None-Match: *` (create only) and `If-Match: <etag>`
(replace only that version) are honoured, as the client sends them.

Refusals are JSON `{"error": {"code", "message"}}`: 400 `invalid` / `bad_host`, 401
`token_invalid`, 403 `not_owner` / `aid_mismatch`, 412 `exists` / `etag_mismatch`, 413
`too_large`.
"""

from __future__ import annotations

from aiohttp import web

from ._agent_cards import MAX_CARD_BYTES, CardError, StoredCard, check_card
from ._auth_methods import check_aid
from ._errors import RPCError
from ._gateway_core import GatewayCore
from ._group_aid_cards import card_publisher, entity_headers

__all__ = ["add_agent_md_routes"]

_MARKDOWN = "text/markdown"


def add_agent_md_routes(app: web.Application, core: GatewayCore) -> None:
    """Register `/agent.md` (GET also answers HEAD)."""

    async def read(request: web.Request) -> web.Response:
        try:
            aid = _host_aid(request, core.issuer)
        except CardError as exc:
            return web.Response(status=404, text=f"{exc.message}\n")
        card = core.cards.get(aid)
        entity = entity_headers(core, aid)  # a group AID's owner and certificate, even without a card
        if card is None:
            return web.Response(status=404, text=f"no agent.md for {aid}\n", headers=entity)
        if request.headers.get("If-None-Match", "").strip() == card.etag:
            return web.Response(status=304, headers={**_card_headers(card), **entity})
        return web.Response(body=card.body, content_type=_MARKDOWN, charset="utf-8",
                            headers={**_card_headers(card), **entity})

    async def publish(request: web.Request) -> web.Response:
        try:
            aid = _host_aid(request, core.issuer)
            _require_owner(request, core, aid)
            body = await _read_bounded(request)
            mode = check_card(aid, body)
            existing = core.cards.get(aid)
            _check_condition(request, existing)
        except CardError as exc:
            return web.json_response({"error": {"code": exc.code, "message": exc.message}}, status=exc.status)
        card = core.cards.put(aid, body, mode)
        await core.db.commit()
        core.events.emit("agent_md.published", aid=aid, etag=card.etag, behavior_mode=mode)
        return web.json_response(
            {"aid": aid, "etag": card.etag, "last_modified": card.last_modified, "behavior_mode": mode},
            status=201 if existing is None else 200, headers=_card_headers(card),
        )

    app.router.add_get("/agent.md", read)
    app.router.add_put("/agent.md", publish)


def _host_aid(request: web.Request, issuer: str) -> str:
    """The AID the request's `Host` names (without a port), one of this gateway's issuer."""
    host = request.headers.get("Host", "").strip().lower()
    name = host.rsplit(":", 1)[0] if ":" in host and not host.endswith("]") else host
    try:
        return check_aid(name, "Host", issuer)
    except RPCError as exc:
        raise CardError(400, "bad_host", f"Host must name an AID of this gateway: {exc.message}") from None


def _require_owner(request: web.Request, core: GatewayCore, aid: str) -> None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise CardError(401, "token_invalid", "PUT /agent.md needs 'Authorization: Bearer <access token>'")
    owner, reason = core.identities.access_token_owner(token.strip())
    if owner is None:
        raise CardError(401, "token_invalid", reason)
    publisher = card_publisher(core, aid)  # a group's card is its owner's to publish
    if owner != publisher:
        raise CardError(403, "not_owner", f"logged in as {owner}: a card for {aid} is {publisher}'s to publish")


async def _read_bounded(request: web.Request) -> bytes:
    # Read at most one byte past the bound, so a huge body is refused without being held in memory.
    if request.content_length is not None and request.content_length > MAX_CARD_BYTES:
        raise CardError(413, "too_large", f"the card is {request.content_length} bytes; the limit is {MAX_CARD_BYTES}")
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_CARD_BYTES:
        chunk = await request.content.read(MAX_CARD_BYTES + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > MAX_CARD_BYTES:
        raise CardError(413, "too_large", f"the card is over {MAX_CARD_BYTES} bytes")
    return b"".join(chunks)


def _check_condition(request: web.Request, existing: StoredCard | None) -> None:
    if request.headers.get("If-None-Match", "").strip() == "*" and existing is not None:
        raise CardError(412, "exists", "If-None-Match: * but a card is already published")
    expected = request.headers.get("If-Match", "").strip()
    if expected and expected != "*" and (existing is None or existing.etag != expected):
        raise CardError(412, "etag_mismatch", "If-Match names a version that is not the published one")


def _card_headers(card: StoredCard) -> dict[str, str]:
    # no-cache: a reader may keep the card but revalidates it (ETag) before use, so a new card shows at once.
    return {"ETag": card.etag, "Last-Modified": card.last_modified, "Cache-Control": "no-cache"}
