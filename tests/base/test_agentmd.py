"""agent.md: parse, validate (errors name the field), render, round trip, size limit."""

from __future__ import annotations

import pytest

from aun_runtime.agentmd import MAX_AGENT_MD_BYTES, AgentCard, AgentMDError, parse_agent_md, render_agent_md

GOOD = """---
aid: "reviewer.local"
name: "Code Reviewer"
type: "assistant"
version: "1.2.3"
description: "Reads code and says what is wrong with it"
tags:
  - review
  - python
homepage: "https://example.invalid/reviewer"
---
# Code Reviewer

Reviews one change at a time.
"""


def test_a_good_card_parses_with_its_extra_fields_and_body() -> None:
    card = parse_agent_md(GOOD)
    assert (card.aid, card.name, card.type, card.version) == (
        "reviewer.local",
        "Code Reviewer",
        "assistant",
        "1.2.3",
    )
    assert card.tags == ("review", "python")
    assert card.extra == {"homepage": "https://example.invalid/reviewer"}
    assert card.body.startswith("# Code Reviewer")


def test_render_then_parse_is_the_same_card() -> None:
    card = parse_agent_md(GOOD)
    assert parse_agent_md(render_agent_md(card)) == card


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('aid: "reviewer.local"', 'aid: "Reviewer"', "aid"),
        ('aid: "reviewer.local"\n', "", "aid"),
        ('name: "Code Reviewer"', 'name: ""', "name"),
        ('type: "assistant"', 'type: "robot"', "type"),
        ('version: "1.2.3"', 'version: "1.2"', "version"),
        ('version: "1.2.3"', "version: 1.2", "version"),
        (
            'description: "Reads code and says what is wrong with it"',
            f'description: "{"x" * 101}"',
            "description",
        ),
        ("  - python", "  - 3", "tags"),
    ],
)
def test_each_invalid_field_is_named(old: str, new: str, field: str) -> None:
    with pytest.raises(AgentMDError) as info:
        parse_agent_md(GOOD.replace(old, new))
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("# no front matter\n", "front matter"),
        ("---\n- a\n- b\n---\n", "mapping"),
        ("---\naid: [unclosed\n---\n", "YAML"),
        ("---\n" + "x: y\n" * 2000 + "---\n", "limit"),
    ],
)
def test_document_level_errors(text: str, hint: str) -> None:
    with pytest.raises(AgentMDError, match=hint) as info:
        parse_agent_md(text)
    assert info.value.field is None


def test_the_size_limit_is_4_kb_and_applies_to_rendering_too() -> None:
    card = parse_agent_md(GOOD)
    big = AgentCard(**{**card.__dict__, "body": "y" * MAX_AGENT_MD_BYTES})
    with pytest.raises(AgentMDError, match="4096"):
        render_agent_md(big)


async def test_an_agent_class_card_is_checked_at_registration_and_served_by_the_runtime() -> None:
    from aun_runtime import AgentRegistrationError, AUNAgent, AUNRuntime

    class Reviewer(AUNAgent):
        agent_md = GOOD

    runtime = AUNRuntime()
    await runtime.register_agent("reviewer.local", Reviewer)
    card = runtime.agent_card("reviewer.local")
    assert card is not None and card.name == "Code Reviewer"
    assert runtime.agent_info("reviewer.local")["description"] == "Reads code and says what is wrong with it"
    with pytest.raises(AgentRegistrationError, match=r"describes reviewer\.local"):
        await runtime.register_agent("other.local", Reviewer)
    with pytest.raises(AgentMDError) as info:
        await runtime.register_agent("third.local", Reviewer, card=GOOD.replace("1.2.3", "one"))
    assert info.value.field == "version"
    await runtime.close()
