"""reply() in a mention group mentions the sender by default, so the asker sees the answer."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from aun_runtime import (
    AUNAgent,
    AUNMessage,
    AUNRuntime,
    JsonPayload,
    MessageContext,
    RecordKind,
    TextPayload,
    event,
)
from protocols.aun import AIDMention

#: How the replier under test answers: what it passes as ``mentions`` and as payload.
HOW: dict[str, object] = {}


class Replier(AUNAgent):
    @event
    async def on_text(self, message: AUNMessage, ctx: MessageContext) -> None:
        if message.from_aid == self.aid or not message.text or not message.text.startswith("ask"):
            return
        payload = HOW.get("payload", "answer")
        if "mentions" in HOW:
            mentions = HOW["mentions"]
            assert mentions is None or isinstance(mentions, Sequence)
            await self.reply(payload, mentions=mentions)  # type: ignore[arg-type]
        else:
            await self.reply(payload)  # type: ignore[arg-type]


async def _answers(mode: str, how: dict[str, object]) -> tuple[list[AUNMessage], list[AUNMessage]]:
    """What the asker received, and what the replier sent, for one question in a ``mode`` group."""
    HOW.clear()
    HOW.update(how)
    runtime = AUNRuntime()
    await runtime.start()
    await runtime.register_agent("replier.local", Replier)
    asker = await runtime.open_inbox("asker.local")
    await runtime.create_group("room", ["replier.local", "asker.local"], dispatch_mode=mode)
    question = await asker.group_send("room", "ask: anyone?", mentions=["replier.local"])
    await runtime.settle()
    received = asker.replies_to(question)
    sent = [
        r.message for r in runtime.archive.records()
        if r.kind is RecordKind.SENT and r.message and r.message.from_aid == "replier.local"
    ]
    await runtime.close()
    return received, [m for m in sent if m is not None]


def _mentioned(message: AUNMessage) -> list[str]:
    return [m.aid for m in message.mentions if isinstance(m, AIDMention)]


async def test_a_reply_in_a_mention_group_mentions_the_asker_so_the_asker_sees_it() -> None:
    received, _ = await _answers("mention", {})
    assert [m.text for m in received] == ["answer"]
    assert _mentioned(received[0]) == ["asker.local"]


async def test_an_explicit_empty_list_turns_the_default_off() -> None:
    received, sent = await _answers("mention", {"mentions": []})
    assert received == []  # filtered for the asker, as asked
    assert sent and all(_mentioned(m) == [] for m in sent)


async def test_explicit_mentions_are_kept_as_given() -> None:
    received, sent = await _answers("mention", {"mentions": ["asker.local"]})
    assert [_mentioned(m) for m in received] == [["asker.local"]]
    assert all(_mentioned(m) == ["asker.local"] for m in sent)


@pytest.mark.parametrize("how", [{}, {"mentions": None}])
async def test_a_broadcast_group_reply_mentions_nobody_by_default(how: dict[str, object]) -> None:
    received, _ = await _answers("broadcast", how)
    assert [(m.text, _mentioned(m)) for m in received] == [("answer", [])]


async def test_a_text_payload_with_mentions_of_its_own_is_left_alone() -> None:
    own = TextPayload(text="answer", mentions=(AIDMention(aid="replier.local"),))
    _, sent = await _answers("mention", {"payload": own})
    assert [_mentioned(m) for m in sent] == [["replier.local"]]


async def test_a_json_reply_gets_no_mentions_since_none_can_ride_on_it() -> None:
    _, sent = await _answers("mention", {"payload": JsonPayload(kind="note", data={"x": 1})})
    assert len(sent) == 1 and sent[0].mentions == ()
