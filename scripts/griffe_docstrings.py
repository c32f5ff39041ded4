"""A griffe extension for the docs site: it reads the docstrings' reStructuredText habits as Markdown.

* A Google-style ``Example:`` section is read as ``Examples:`` (griffe knows only the plural), so its
  doctest lines render as code, not prose.
* A Sphinx role such as ``:class:`~aun_runtime.Budgets``` becomes inline code (``Budgets``).

Nothing in the source changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^Example:[ \t]*$", re.MULTILINE)
_ROLE = re.compile(r":(?:py:)?(?:class|mod|meth|func|data|attr|exc|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class DocstringMarkdown(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_role, _EXAMPLE.sub("Examples:", obj.docstring.value))
