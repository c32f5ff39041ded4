"""The agent.md card an exposed AID publishes, declaring its behaviour mode `autonomous`.

AUN's behaviour rules (doc 13, receiver duties) recommend that a receiver declare its behaviour
mode in its metadata, so senders can tell their users that silence is legal. An exposed agent does
it in its card's front matter, `behavior_mode: autonomous`; the gateway reports the field back in
`meta.status`. The card is the agent's own agent.md when it has one (its fields and body kept), or
a minimal one made from its description.

The card is signed with the AID's key by the AUN client (its `sign_agent_md`) and published with
`PUT /agent.md`, `Host: <aid>` and the AID's access token, the request the client itself makes;
a card already published with the same document is left alone.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from ..base._agent_md import (
    BEHAVIOR_MODE_FIELD,
    MAX_DESCRIPTION_CHARS,
    SIGNATURE_MARKER,
    AgentCard,
    AgentMDError,
    render_agent_md,
)

if TYPE_CHECKING:
    from aun_runtime import AUNRuntime

__all__ = ["PUBLISH_TIMEOUT", "card_text", "publish_card"]

log = logging.getLogger("aun_runtime.gateway")

#: How long publishing a card may take, in seconds, all requests together; past it the AID goes on
#: without a published card (the next connection publishes it).
PUBLISH_TIMEOUT = 10.0
#: How many times a publish is tried when another writer changed the card in between (HTTP 412).
_PUBLISH_ATTEMPTS = 2


def card_text(runtime: AUNRuntime, aid: str) -> str | None:
    """The agent.md `aid` publishes, or None if it cannot be made (logged)."""
    info = runtime.agent_info(aid)
    card = runtime.agent_card(aid) or _minimal_card(aid, info["description"])
    card = replace(card, extra={**card.extra, BEHAVIOR_MODE_FIELD: info["mode"]})
    try:
        text = render_agent_md(card)
    except AgentMDError as exc:
        log.warning("%s publishes no agent.md: %s", aid, exc)
        return None
    # The client signs only a document that ends with a newline (the signature starts on its own line).
    return text if text.endswith("\n") else text + "\n"


def _minimal_card(aid: str, description: str) -> AgentCard:
    name = aid.split(".", 1)[0]
    summary = " ".join(description.split())[:MAX_DESCRIPTION_CHARS] or f"{name}, an autonomous agent"
    return AgentCard(aid=aid, name=name, type="assistant", version="1.0.0", description=summary, body=f"# {name}\n")


async def publish_card(client: Any, aid: str, text: str) -> bool:
    """Publish `text` as `aid`'s card through the gateway `client` is connected to.

    Returns whether the gateway holds this document now. Failures are logged, never raised: an
    agent without a published card still sends and receives.
    """
    try:
        return await asyncio.wait_for(_publish(client, aid, text), PUBLISH_TIMEOUT)
    except Exception as exc:
        log.warning("%s: agent.md not published: %s: %s", aid, type(exc).__name__, exc)
        return False


async def _publish(client: Any, aid: str, text: str) -> bool:
    import aiohttp  # installed with the AUN client

    url = _card_url(str(client.gateway_url or ""))
    signed = client.current_aid.sign_agent_md(text)
    if not signed.ok or signed.data is None:
        raise RuntimeError(f"the client could not sign the card: {signed.error}")
    body = str(signed.data["signed"]).encode()
    async with aiohttp.ClientSession() as session:
        for _ in range(_PUBLISH_ATTEMPTS):
            async with session.get(url, headers={"Host": aid}) as answer:
                current = await answer.read() if answer.status == 200 else None
                etag = answer.headers.get("ETag", "")
            if current is not None and _document(current) == text:
                return True  # already published: a new signature alone is no change
            condition = {"If-Match": etag} if current is not None else {"If-None-Match": "*"}
            headers = {"Host": aid, "Authorization": f"Bearer {client.access_token}",
                       "Content-Type": "text/markdown; charset=utf-8", **condition}
            async with session.put(url, data=body, headers=headers) as answer:
                if answer.status == 412:
                    continue  # someone else published in between: look again
                if answer.status >= 300:
                    raise RuntimeError(f"HTTP {answer.status}: {(await answer.text())[:200]}")
                log.info("%s published its agent.md (%s)", aid, BEHAVIOR_MODE_FIELD)
                return True
    return False


def _card_url(gateway_url: str) -> str:
    parsed = urlparse(gateway_url)
    if not parsed.netloc:
        raise RuntimeError(f"no gateway URL to publish to ({gateway_url!r})")
    scheme = "https" if parsed.scheme == "wss" else "http"
    return f"{scheme}://{parsed.netloc}/agent.md"


def _document(body: bytes) -> str:
    """The card without its signature block (what was signed)."""
    return body.decode("utf-8", errors="replace").split(SIGNATURE_MARKER, 1)[0]
