"""Docstrings are written in the Markdown the documentation site renders, and so is `--help`.

mkdocstrings renders Google-style docstrings as Markdown: a cross-reference is
``[`AUNRuntime`][aun_runtime.AUNRuntime]`` or plain backticks, a code example a fenced block. A Sphinx
role, a reST directive or a literal block would reach the reader as raw text; so would double
backticks in the command's help, which argparse prints as they are.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

from aun_runtime.cli import main

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("aun_runtime", "agents", "protocols")
REST = re.compile(
    r"^\s*\.\. [a-z][\w-]*::"  # a directive (.. code-block:: python, .. note::)
    r"|:(?:py:)?(?:class|meth|func|mod|data|attr|exc|obj|const):`"  # a Sphinx role
    r"|(?<!`)``(?!`)"  # reST inline literal (``x``); a Markdown fence has three
    r"|\S::$"  # a literal block announced by ::
    r"|^\s*=+(?:\s+=+)+\s*$"  # the rule of a reST table
)


def _docstrings(tree: ast.Module) -> list[ast.Constant]:
    """Every bare string statement: module, class, function and attribute docstrings."""
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    ]


def _rest_lines(text: str) -> list[str]:
    found, fenced = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and REST.search(line):
            found.append(line.strip())
    return found


def test_no_docstring_is_written_in_restructuredtext() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in _docstrings(ast.parse(path.read_text(encoding="utf-8"))):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {line}" for line in _rest_lines(node.value)]
    assert not found, "\n".join(found)


def _help(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([*args, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


def test_the_commands_help_shows_no_restructuredtext() -> None:
    top = _help()
    commands = re.search(r"\{([\w,-]+)\}", top)
    assert commands is not None, top
    pages = {"aun-runtime": top} | {name: _help(name) for name in commands.group(1).split(",")}
    assert len(pages) > 5
    found = [f"{name}: {line}" for name, text in pages.items() for line in _rest_lines(text)]
    assert not found, "\n".join(found)
