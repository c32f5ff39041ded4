"""A griffe extension for the docs site: a docstring's ``Example:`` section is read as ``Examples:``.

The docstrings use Google style's singular ``Example:`` heading, which griffe does not recognise,
so its doctest lines would be rendered as prose. Nothing in the source changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub("Examples:", obj.docstring.value)
