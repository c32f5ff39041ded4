"""`CassetteChatCompletionClient`: answers from a cassette; records what it lacks when told to.

Replaying is the default: an answer comes from the cassette entry whose key is the request's content
key, so concurrent agents get the same answers whatever order they ask in. A request the cassette does
not hold raises [`CassetteMissError`][aun_runtime.models.CassetteMissError], which names the request, shows where
it departs from the closest recorded one, and says how to record it; nothing is ever made up.

Recording: given `record_from` (any `ChatCompletionClient`), a missing answer is asked of that
client, stored, and the cassette file is rewritten at once (atomically, entries sorted by key).
Identical requests in flight at the same time are asked once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from autogen_core.models import ChatCompletionClient, CreateResult

from ._cassette import Cassette
from ._errors import CassetteMissError
from ._offline import OfflineChatCompletionClient
from ._request import ModelRequest, canonical_json

__all__ = ["RECORD_HINT", "CassetteChatCompletionClient"]

RECORD_HINT = (
    "To record it, run again with a model configured and recording on, e.g. "
    "AUN_MODEL=<model> AUN_MODEL_BASE_URL=<url> AUN_MODEL_API_KEY=<key> AUN_MODEL_RECORD=1 "
    "(or AUN_MODEL_CLIENT=module:factory for any ChatCompletionClient), or construct "
    "CassetteChatCompletionClient(cassette, record_from=<client>)"
)


class CassetteChatCompletionClient(OfflineChatCompletionClient):
    """A deterministic client: answers keyed by request content, replayed from (or recorded to) a cassette.

    Args:
        cassette: a [`Cassette`][aun_runtime.models.Cassette], or the path of its file (loaded now; it must exist unless
            recording).
        record_from: a live client to ask, and record, when the cassette lacks an answer. `None`
            (the default) replays only.
        save: write the cassette file after each recorded answer.
    """

    def __init__(
        self,
        cassette: Cassette | str | Path,
        *,
        record_from: ChatCompletionClient | None = None,
        save: bool = True,
    ) -> None:
        if not isinstance(cassette, Cassette):
            cassette = Cassette.load(cassette, missing_ok=record_from is not None)
        if record_from is not None:
            # Agents decide how to ask from model_info; replay must let them decide the same way.
            cassette.model_info = dict(record_from.model_info)  # type: ignore[assignment]
        super().__init__(cassette.model_info)
        self.cassette = cassette
        self.record_from = record_from
        self.save = save
        self.recorded = 0
        self._in_flight: dict[str, asyncio.Future[tuple[CreateResult, list[str] | None]]] = {}

    async def answer(self, request: ModelRequest, *, stream: bool) -> tuple[CreateResult, list[str] | None]:
        entry = self.cassette.get(request.key)
        if entry is not None:
            return entry.result.model_copy(update={"cached": True}), (
                list(entry.chunks) if entry.chunks is not None else None
            )
        if self.record_from is None:
            raise CassetteMissError(self.miss_message(request), key=request.key)
        pending = self._in_flight.get(request.key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[tuple[CreateResult, list[str] | None]] = (
            asyncio.get_running_loop().create_future()
        )
        self._in_flight[request.key] = future
        try:
            result, chunks = await self._ask_live(self.record_from, request, stream)
            self.cassette.put(request, result, chunks)
            self.recorded += 1
            if self.save and self.cassette.path is not None:
                self.cassette.save()
            future.set_result((result, chunks))
            return result, chunks
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure with no one else waiting is not "never retrieved"
            raise
        finally:
            del self._in_flight[request.key]

    @staticmethod
    async def _ask_live(
        live: ChatCompletionClient, request: ModelRequest, stream: bool
    ) -> tuple[CreateResult, list[str] | None]:
        if not stream:
            return await live.create(request.messages, **request.create_args), None
        chunks: list[str] = []
        final: CreateResult | None = None
        async for item in live.create_stream(request.messages, **request.create_args):
            if isinstance(item, CreateResult):
                final = item
            else:
                chunks.append(item)
        if final is None:
            raise RuntimeError(f"{type(live).__name__}.create_stream ended without a CreateResult")
        return final, chunks

    def miss_message(self, request: ModelRequest) -> str:
        """Why there is no answer, and how to get one."""
        where = self.cassette.path or "(in-memory cassette)"
        lines = [f"no recorded answer in cassette {where} for {request.describe()}."]
        closest = self.cassette.closest(request)
        wanted = request.data["messages"]
        if closest is None:
            lines.append("The cassette is empty.")
        else:
            entry, same = closest
            recorded = entry.request.get("messages", [])
            if same == len(wanted) == len(recorded):
                differs = [
                    k
                    for k in sorted(set(entry.request) | set(request.data))
                    if entry.request.get(k) != request.data.get(k)
                ]
                lines.append(
                    f"The closest recorded request ({entry.key[:16]}…) has the same {same} messages but "
                    f"differs in: {', '.join(differs)}."
                )
            else:
                lines.append(
                    f"The closest recorded request ({entry.key[:16]}…) matches the first {same} of "
                    f"{len(wanted)} messages; message {same + 1} differs:"
                )
                old, new = _message_text(recorded, same), _message_text(wanted, same)
                at = _first_difference(old, new)
                lines.append(f"  recorded:  {_around(old, at)}")
                lines.append(f"  requested: {_around(new, at)}")
        lines.append(RECORD_HINT + ".")
        return "\n".join(lines)


def _message_text(messages: list[object], index: int) -> str | None:
    if index >= len(messages):
        return None
    message = messages[index]
    content = message.get("content") if isinstance(message, dict) else message
    source = message.get("source") if isinstance(message, dict) else None
    text = content if isinstance(content, str) else canonical_json(content)
    return f"[{source}] {text}" if source else text


def _first_difference(a: str | None, b: str | None) -> int:
    if a is None or b is None:
        return 0
    for n, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return n
    return min(len(a), len(b))


def _around(text: str | None, at: int, before: int = 40, after: int = 100) -> str:
    """The text near where two versions part, so a long prompt's one changed word is easy to see."""
    if text is None:
        return "(no such message)"
    start = max(0, at - before)
    piece = text[start : at + after]
    return ("…" if start else "") + repr(" ".join(piece.split())) + ("…" if at + after < len(text) else "")
