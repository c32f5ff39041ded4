"""agent.md: the card an AUN agent publishes about itself. Parse, validate, render.

The format is YAML front matter followed by Markdown, at most 4 KB:

```text
---
aid: "reviewer.local"
name: "Code Reviewer"
type: "assistant"
version: "1.0.0"
description: "Reads code and says what is wrong with it"
tags: [review, python]
---
# Code Reviewer
Skills, usage, limits...
```

Required fields: `aid` (an AID), `name`, `type` (one of `AGENT_TYPES`), `version`
(`MAJOR.MINOR.PATCH`) and `description` (at most 100 characters). `tags` is an optional list of
strings. Other fields are kept as they are. Every error names the field at fault.

Example:
    >>> card = parse_agent_md(
    ...     '---\\naid: echo.local\\nname: Echo\\ntype: assistant\\nversion: 1.0.0\\n'
    ...     'description: Says things back\\n---\\n# Echo\\n'
    ... )
    >>> card.name, card.tags
    ('Echo', ())
    >>> parse_agent_md(render_agent_md(card)) == card
    True
"""

from .base._agent_md import (
    AGENT_TYPES,
    MAX_AGENT_MD_BYTES,
    AgentCard,
    AgentMDError,
    parse_agent_md,
    read_front_matter,
    render_agent_md,
)

__all__ = [
    "AGENT_TYPES",
    "MAX_AGENT_MD_BYTES",
    "AgentCard",
    "AgentMDError",
    "parse_agent_md",
    "read_front_matter",
    "render_agent_md",
]
