"""Reading observer output: every marker variant, and no marker ever leaks, even split in a stream."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.observer import (
    OBSERVER_PROMPT,
    ObserverDecision,
    ObserverStreamParser,
    observer_system_prompt,
    parse_observer_output,
)

SILENT = ObserverDecision.SILENT
REPLY = ObserverDecision.REPLY

SILENT_VARIANTS = [
    "__SILENT__",
    "   \n\t__SILENT__",
    "__SILENT__ not my topic",
    "`__SILENT__`",
    "**__SILENT__**",
    "*__SILENT__*",
    "```\n__SILENT__\n```",
    "```text\n__SILENT__```",
    '"__SILENT__"',
    "[__SILENT__]",
    "\\_\\_SILENT\\_\\_",
    "__silent__",
    "__ SILENT __",
    "SILENT",
    "I'd rather not weigh in. __SILENT__",  # of two minds: silence
    "__REPLY__ __SILENT__",
    "__REPLY__",  # nothing to send
    "   ",
]

REPLY_VARIANTS = [
    ("__REPLY__ Friday works.", "Friday works.", "__REPLY__"),
    ("  __REPLY__\n\nFriday works.", "Friday works.", "__REPLY__"),
    ("`__REPLY__` Friday works.", "Friday works.", "__REPLY__"),
    ("**__REPLY__**: Friday works.", "Friday works.", "__REPLY__"),
    ("\\_\\_REPLY\\_\\_ Friday works.", "Friday works.", "__REPLY__"),
    ("__reply__ Friday works.", "Friday works.", "__REPLY__"),
    ("Friday works.", "Friday works.", None),  # unmarked: sent as it is
    ("Friday works. __REPLY__", "Friday works.", None),  # a stray marker is removed
    ("__REPLY__ (see the notes)", "(see the notes)", "__REPLY__"),
    ("Silent night is a carol.", "Silent night is a carol.", None),
]


@pytest.mark.parametrize("raw", SILENT_VARIANTS)
def test_silent_variants_are_silent(raw: str) -> None:
    output = parse_observer_output(raw)
    assert output.decision is SILENT and output.text == ""


@pytest.mark.parametrize(("raw", "text", "marker"), REPLY_VARIANTS)
def test_reply_variants_send_the_text_without_any_marker(raw: str, text: str, marker: str | None) -> None:
    output = parse_observer_output(raw)
    assert output.decision is REPLY
    assert output.text == text and output.marker == marker


def test_the_reason_after_silence_is_kept_for_the_archive() -> None:
    assert parse_observer_output("__SILENT__ bob already answered").note == "bob already answered"


def _stream(chunks: list[str]) -> tuple[str, ObserverStreamParser]:
    parser = ObserverStreamParser()
    shown = "".join(parser.feed(chunk) for chunk in chunks)
    return shown, parser


@pytest.mark.parametrize("raw", ["__SILENT__ not mine", "**__SILENT__**", "  `__SILENT__`"])
def test_a_silent_marker_split_anywhere_shows_nothing(raw: str) -> None:
    for cut in range(1, len(raw)):
        shown, parser = _stream([raw[:cut], raw[cut:]])
        assert shown == ""
        assert parser.finish().decision is SILENT


def test_silence_is_known_as_soon_as_the_marker_is_complete() -> None:
    parser = ObserverStreamParser()
    assert parser.feed("  __SIL") == "" and parser.decision is None
    parser.feed("ENT__")
    assert parser.decision is SILENT  # the caller can stop the stream here


def test_an_unmarked_reply_is_known_early() -> None:
    parser = ObserverStreamParser()
    parser.feed("Sure")
    assert parser.decision is REPLY


FRAGMENTS = st.sampled_from(
    ["__REPLY__", "__SILENT__", "**", "`", " ", "\n", "Friday", " works", "_", "__", "REPLY", "SILENT", "ok."]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(FRAGMENTS, min_size=1, max_size=12), cuts=st.lists(st.integers(0, 200), max_size=6))
def test_streamed_output_never_shows_a_marker(parts: list[str], cuts: list[int]) -> None:
    raw = "".join(parts)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    shown, parser = _stream(chunks)
    final = parser.finish()
    assert final == parse_observer_output(raw)  # streaming reads exactly as the whole text does
    for text in (shown, final.text):
        assert "__SILENT__" not in text.upper() and "__REPLY__" not in text.upper()
    if final.decision is SILENT:
        assert final.text == ""
    else:
        assert final.text.startswith(shown.strip()) or shown == ""


def test_the_prompt_states_each_rule_of_the_behaviour_table() -> None:
    prompt = observer_system_prompt("ops.local", "You run the deploys.")
    assert prompt.startswith("You are ops.local, a member of a group chat. You run the deploys.")
    for rule in (
        "nothing to do with you or your role: stay silent",
        "carries on a conversation you are taking part in: reply",
        "names you, or asks you something directly: reply",
        "just made the point you would make: stay silent, unless you are asked",
        "not sure whether to speak: stay silent",
        "write __SILENT__",
        "write __REPLY__",
    ):
        assert rule in prompt
    assert "{aid}" in OBSERVER_PROMPT
